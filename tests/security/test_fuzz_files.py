"""Structured fuzzing of the input files (Hypothesis, bounded): a results file, a run
directory's run.json and results.jsonl, a Hugging Face config.json, a kubectl listing and
the TOML files (inventory, policy, gate profile, workload).

Each example takes a valid file and replaces one value anywhere in it with a hostile one
(nesting thousands deep, a 5,000-digit or 2**70 integer, 1e308, 1e400, negative and zero
numbers, wrong types, markup and control characters), deletes it, or adds an unknown key,
then runs the command a user would run on it, in process. The command must end with
exit 0, 1 or 2 through ``netqual.cli.main``, which turns every NetqualError into one line:
any other exception (a traceback) fails the example.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from factories import make_results, write_results
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import DATA

from netqual.cli import main
from netqual.model.plan import ProbePlan
from netqual.model.policy import Policy
from netqual.model.run import Mode
from netqual.results import path_to_dict, results_to_dict
from netqual.run.resume import identity

EXAMPLES = 100  # per input kind; the whole file runs in well under 30 s
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # the same cases every run: a failure here is never flaky
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Raw JSON text stands in for what json.dumps cannot write (or writes too slowly).
RAW = {
    "@deep-list@": "[" * 5000 + "]" * 5000,
    "@deep-object@": '{"a":' * 3000 + "1" + "}" * 3000,
    "@40-deep@": "[" * 40 + "]" * 40,
    "@5000-digits@": "1" + "0" * 4999,
    "@1e400@": "1e400",
    "@-1e400@": "-1e400",
    "@NaN@": "NaN",
}
HOSTILE: list[Any] = [
    *RAW,
    2**70,
    -(2**70),
    2**63,
    1e308,
    -1e308,
    1e15 + 1,
    -5,
    -5.0,
    0,
    0.0,
    1.5,
    True,
    None,
    "",
    "[/x][link=https://evil.example/]\x1b]0;t\x07\x1b[2J\u2028\u202e",
    "x" * 10_000,
    [],
    [1],
    {},
    {"a": [1, {"b": None}]},
]


def _slots(doc: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path in ``doc`` (dict keys and list indices), the root excluded."""
    out: list[tuple[Any, ...]] = []
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    for key, value in items:
        out.append((*at, key))
        if len(out) < 4000:
            out.extend(_slots(value, (*at, key)))
    return out


@st.composite
def mutations(draw: st.DrawFn, doc: Any) -> tuple[tuple[Any, ...], str, Any]:
    slots = _slots(doc)
    where = draw(st.sampled_from(slots))
    how = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add"]))
    return where, how, draw(st.sampled_from(HOSTILE))


def mutated_text(doc: Any, mutation: tuple[tuple[Any, ...], str, Any]) -> str:
    where, how, value = mutation
    doc = json.loads(json.dumps(doc))
    parent = doc
    for key in where[:-1]:
        parent = parent[key]
    last = where[-1]
    if how == "delete":
        del parent[last]
    elif how == "add" and isinstance(parent, dict):
        parent["unexpected"] = value
    else:
        parent[last] = value
    text = json.dumps(doc)
    for token, raw in RAW.items():
        text = text.replace(json.dumps(token), raw)
    return text


def run_cli(args: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("NETQUAL_WIDTH", "100")
    rc = main(args)  # anything but a NetqualError propagates and fails the example
    assert rc in (0, 1, 2), rc
    return rc


RESULTS = results_to_dict(make_results(4))
PATHS = [path_to_dict(p) for p in make_results(4, all_safe=True).paths]
RUN_JSON = {
    "started_at": "2026-11-29T12:00:00+00:00",
    "fingerprint": "0" * 64,
    "identity": identity(
        make_results(4).nodes, Mode.FULL_MESH, 0, "tcp", Policy(), ProbePlan(iterations=300)
    ),
}
HF_CONFIG = {
    "_name_or_path": "org/model",
    "model_type": "llama",
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "head_dim": 128,
    "torch_dtype": "bfloat16",
}
PODS = json.loads((DATA / "k8s" / "pods.json").read_text())
NODES = json.loads((DATA / "k8s" / "nodes.json").read_text())


@given(data=st.data())
@FUZZ
def test_results_json(data: st.DataObject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "r.json").write_text(mutated_text(RESULTS, data.draw(mutations(RESULTS))))
    run_cli(["report", "r.json", "--html", "r.html", "--csv", "r.csv"], tmp_path, monkeypatch)
    run_cli(["gate", "r.json", "--junit", "j.xml"], tmp_path, monkeypatch)


@given(data=st.data())
@FUZZ
def test_run_directory(
    data: st.DataObject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    kind = data.draw(st.sampled_from(["run.json", "results.jsonl"]))
    run_json, lines = json.dumps(RUN_JSON), [json.dumps(p) for p in PATHS]
    if kind == "run.json":
        run_json = mutated_text(RUN_JSON, data.draw(mutations(RUN_JSON)))
    else:
        i = data.draw(st.integers(0, len(lines) - 2))  # not the last: that one may be torn
        lines[i] = mutated_text(PATHS[i], data.draw(mutations(PATHS[i])))
    (run / "run.json").write_text(run_json)
    (run / "results.jsonl").write_text("".join(line + "\n" for line in lines))
    run_cli(["report", "run"], tmp_path, monkeypatch)


@given(data=st.data())
@FUZZ
def test_hf_config_json(
    data: st.DataObject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.json").write_text(mutated_text(HF_CONFIG, data.draw(mutations(HF_CONFIG))))
    (tmp_path / "w.toml").write_text(
        '[workload]\nmodel = "config.json"\nprefill_tokens_per_s = 20000\n'
    )
    run_cli(["workload", "w.toml"], tmp_path, monkeypatch)


@given(data=st.data())
@FUZZ
def test_kubectl_json(data: st.DataObject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    which = data.draw(st.sampled_from(["pods", "nodes"]))
    doc = PODS if which == "pods" else NODES
    (tmp_path / "pods.json").write_text(json.dumps(PODS))
    (tmp_path / "nodes.json").write_text(json.dumps(NODES))
    (tmp_path / f"{which}.json").write_text(mutated_text(doc, data.draw(mutations(doc))))
    args = ["inventory", "from-k8s", "--pods", "pods.json", "--nodes", "nodes.json"]
    run_cli([*args, "--out", "inv.toml"], tmp_path, monkeypatch)


TOML_VALUES = [
    "[" * 5000 + "]" * 5000,
    "[" * 40 + "1" + "]" * 40,
    "{a = " * 200 + "1" + "}" * 200,
    "1" + "0" * 5000,
    str(2**70),
    "-9223372036854775809",
    "1e400",
    "-1e400",
    "inf",
    "nan",
    "1e308",
    "-5",
    "0",
    "0.0",
    "5e-324",
    "true",
    '"[/x][link=https://evil.example/]\\u001b]0;t\\u0007"',
    '"' + "x" * 10_000 + '"',
    "[]",
    '[1, "a"]',
    "{}",
    "2026-01-01",
]
TOML_FILES = {
    "inventory": (
        '[defaults]\ntoken_file = "t"\n[run]\nmode = "full-mesh"\n'
        '[[node]]\nname = "gpu01"\naddress = "127.0.0.1"\nport = 18515\nrack = "r1"\n'
        '[[node]]\nname = "gpu02"\naddress = "127.0.0.2"\nport = 18515\nrack = "r2"\n',
        ["run", "x.toml", "--dry-run"],
    ),
    "policy": (
        '[policy]\nmetric = "p99"\nsafe_max_us = 200\nunsafe_above_us = 500\nmin_samples = 10\n',
        ["report", "r.json", "--stat", "p50"],
    ),
    "profile": (
        '[limits]\nmax_unsafe = 0\nmax_metric_us = 500\n[[waiver]]\nsrc = "gpu01"\n'
        'dst = "gpu02"\nuntil = 2099-01-01\nreason = "r"\nowner = "o"\n',
        ["gate", "r.json", "--profile", "x.toml"],
    ),
    "workload": (
        '[workload]\nlayers = 32\nkv_heads = 8\nhead_dim = 128\ndtype = "bf16"\n'
        "tp = 1\nchunk_tokens = 256\n"
        "prefill_tokens_per_s = 20000\nprompt_tokens = 32000\nhit_ratio = 0.8\n",
        ["workload", "x.toml"],
    ),
}


@given(data=st.data())
@FUZZ
def test_toml_files(data: st.DataObject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kind = data.draw(st.sampled_from(sorted(TOML_FILES)))
    text, args = TOML_FILES[kind]
    lines = text.splitlines()
    at = data.draw(st.sampled_from([i for i, line in enumerate(lines) if " = " in line]))
    key = lines[at].split(" = ")[0]
    lines[at] = f"{key} = {data.draw(st.sampled_from(TOML_VALUES))}"
    (tmp_path / "x.toml").write_text("\n".join(lines) + "\n")
    if not (tmp_path / "r.json").exists():
        write_results(tmp_path / "r.json", make_results(3))
    if kind == "policy":
        args = ["run", "inv.toml", "--dry-run", "--policy", "x.toml"]
        shutil.copy(tmp_path / "x.toml", tmp_path / "p.toml")
        (tmp_path / "inv.toml").write_text(TOML_FILES["inventory"][0])
    run_cli(args, tmp_path, monkeypatch)


def _set(doc: Any, where: tuple[Any, ...], value: Any) -> str:
    return mutated_text(doc, (where, "replace", value))


FIRST_PATH_RTT = ("paths", 0, "rtt_us")
# Hostile files, each as the file that once got past a reader: exit 2 (or a normal exit
# where the value is only a path's problem), never a traceback.
FINDINGS = [
    ("r.json", _set(RESULTS, (*FIRST_PATH_RTT, "samples"), 2**70), ["report", "r.json"], 2),
    (
        "r.json",
        _set(RESULTS, (*FIRST_PATH_RTT, "histogram", "first_bin"), 10**15),
        ["report", "r.json", "--html", "x.html"],
        2,
    ),
    (
        "r.json",
        _set(RESULTS, (*FIRST_PATH_RTT, "p99"), 1e308),
        ["report", "r.json", "--html", "x.html"],
        2,
    ),
    (
        "r.json",
        _set(RESULTS, ("paths", 0, "details"), {"d": "@deep-object@"}),
        ["gate", "r.json"],
        2,
    ),
    (
        "r.json",
        _set(RESULTS, (*FIRST_PATH_RTT, "p50"), -5.0),
        ["report", "r.json", "--html", "x.html"],
        0,
    ),
    (
        "config.json",
        _set(HF_CONFIG, ("num_hidden_layers",), "@5000-digits@"),
        ["workload", "w.toml"],
        2,
    ),
    ("config.json", _set(HF_CONFIG, ("rope_scaling",), "@deep-list@"), ["workload", "w.toml"], 2),
    ("config.json", _set(HF_CONFIG, ("_name_or_path",), "[/x]"), ["workload", "w.toml"], 0),
    (
        "pods.json",
        _set(PODS, ("items",), [1]),
        ["inventory", "from-k8s", "--pods", "pods.json", "--nodes", "nodes.json"],
        2,
    ),
    ("run/run.json", _set(RUN_JSON, ("identity", "policy"), [1]), ["report", "run"], 2),
    ("run/run.json", _set(RUN_JSON, ("identity",), "@deep-object@"), ["report", "run"], 0),
    (
        "x.toml",
        "[limits]\nmax_unsafe = " + "[" * 5000 + "]" * 5000 + "\n",
        ["gate", "r.json", "--profile", "x.toml"],
        2,
    ),
    (
        "x.toml",
        "[limits]\nmax_unsafe = 1" + "0" * 5000 + "\n",
        ["gate", "r.json", "--profile", "x.toml"],
        2,
    ),
]


@pytest.mark.parametrize(("name", "text", "args", "code"), FINDINGS)
def test_the_reviewed_hostile_files(
    name: str,
    text: str,
    args: list[str],
    code: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PATHS))
    (tmp_path / "run" / "run.json").write_text(json.dumps(RUN_JSON))
    write_results(tmp_path / "r.json", make_results(3))
    (tmp_path / "config.json").write_text(json.dumps(HF_CONFIG))
    (tmp_path / "w.toml").write_text(
        '[workload]\nmodel = "config.json"\nprefill_tokens_per_s = 1e4\n'
    )
    (tmp_path / "pods.json").write_text(json.dumps(PODS))
    (tmp_path / "nodes.json").write_text(json.dumps(NODES))
    (tmp_path / name).write_text(text)
    assert run_cli(args, tmp_path, monkeypatch) == code
    err = capsys.readouterr().err
    if code == 2:
        assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err


def test_64_chunks_and_a_workload_is_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "inv.toml").write_text(TOML_FILES["inventory"][0])
    chunks = [arg for i in range(1, 65) for arg in ("--chunk", str(i * 4096))]
    args = ["run", "inv.toml", "--dry-run", "--workload", "llama-3.1-8b-tp1", *chunks]
    assert run_cli(args, tmp_path, monkeypatch) == 2
    assert "plan.chunks_bytes" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("prefill_tokens_per_s = 5e-324", "prefill_tokens_per_s: must be >= 0.001"),
        ("prefill_tokens_per_s = inf", "number out of range"),
        ("prefill_tokens_per_s = 1e12", "prefill_tokens_per_s: must be <= 1e+09"),
        ("local_read_gbps = 1e-300", "local_read_gbps: must be >= 0.001"),
        ('name = "' + "x" * 50_000 + '"', "name: longer than 200 characters"),
        ("chunk_tokens = 1099511627776", "chunk_tokens: must be <= 16777216"),
    ],
)
def test_workload_rates_and_names_are_bounded(
    line: str,
    words: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = TOML_FILES["workload"][0]
    key = line.split(" = ", maxsplit=1)[0]
    lines = [x for x in text.splitlines() if not x.startswith(key + " ")]
    (tmp_path / "x.toml").write_text("\n".join([*lines, line]) + "\n")
    assert run_cli(["workload", "x.toml"], tmp_path, monkeypatch) == 2
    assert words in capsys.readouterr().err
