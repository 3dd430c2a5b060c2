"""`netqual workload`: KV sizes from a config.json or inline fields, the budget, presets,
and bad workload files (exit 2 naming the file and the field). Known answers come from
the models' published configs; the formula is in docs/workload.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import netqual, run_in_process
from hypothesis import given
from hypothesis import strategies as st
from paths import REPO

from netqual.workload import Attention, Dtype, KvModel, load_workload, preset_names

MP = pytest.MonkeyPatch
CAP = pytest.CaptureFixture[str]

LLAMA_70B = {
    "_name_or_path": "meta-llama/Llama-3.1-70B",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 8192,
    "num_attention_heads": 64,
    "num_hidden_layers": 80,
    "num_key_value_heads": 8,
    "torch_dtype": "bfloat16",
}


def write_workload(directory: Path, body: str, config: dict[str, object] | None = None) -> Path:
    if config is not None:
        (directory / "config.json").write_text(json.dumps(config), encoding="utf-8")
    path = directory / "workload.toml"
    path.write_text("[workload]\n" + body, encoding="utf-8")
    return path


def workload_json(args: list[str], cwd: Path, monkeypatch: MP, capsys: CAP) -> dict[str, Any]:
    r = run_in_process(["workload", *args, "--json"], cwd, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)["workload"]
    assert isinstance(out, dict)
    return out


def test_llama_70b_config_known_answer_through_the_process(tmp_path: Path) -> None:
    """The issue's acceptance case, run as a user runs it."""
    path = write_workload(
        tmp_path,
        'model = "config.json"\ntp = 8\nchunk_tokens = 256\nprefill_tokens_per_s = 20000\n',
        LLAMA_70B,
    )
    r = netqual("workload", str(path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "per token per rank" in out
    assert "40 KiB" in out and "40,960" in out
    assert "10.0 MiB" in out and "10,485,760" in out
    assert "80.0 MiB" in out and "83,886,080" in out  # the node's 8 ranks
    assert "Budget: 12.8 ms (recompute)" in out
    r = netqual("workload", str(path), "--json", cwd=tmp_path)
    w = json.loads(r.stdout)["workload"]
    assert w["kv_bytes_per_token"] == 2 * 80 * 8 * 128 * 2
    assert w["kv_bytes_per_token_per_rank"] == 40 * 1024
    assert w["chunk_bytes"] == 10_485_760
    assert w["node_chunk_bytes"] == 8 * 10_485_760
    assert w["ranks_per_node"] == 8 and w["chunk_tokens"] == 256 and w["tp"] == 8
    assert w["dtype"] == "bf16" and w["model"]["name"] == "meta-llama/Llama-3.1-70B"
    assert w["budget_us"] == pytest.approx(12_800.0)
    assert w["baseline"]["kind"] == "recompute"


@pytest.mark.parametrize(
    ("preset", "per_token_per_rank", "chunk_bytes"),
    [
        ("llama-3.1-70b-tp8", 40_960, 10_485_760),
        # the field report's class: 62 layers, 8 KV heads, head_dim 128, bf16, TP8
        ("qwen3-coder-480b-tp8", 31_744, 8_126_464),
        # 4 KV heads over 8 ranks: one (replicated) head per rank, not half a head
        ("qwen3-235b-a22b-tp8", 2 * 94 * 1 * 128 * 2, 256 * 48_128),
        # MLA: 61 layers x (512 + 64) x 2 bytes on every rank, not divided by TP
        ("deepseek-v3-tp8", 61 * 576 * 2, 256 * 70_272),
        ("llama-3.1-8b-tp1", 131_072, 33_554_432),
    ],
)
def test_presets_known_answers(
    preset: str,
    per_token_per_rank: int,
    chunk_bytes: int,
    tmp_path: Path,
    monkeypatch: MP,
    capsys: CAP,
) -> None:
    w = workload_json([preset], tmp_path, monkeypatch, capsys)
    assert w["kv_bytes_per_token_per_rank"] == per_token_per_rank
    assert w["chunk_bytes"] == chunk_bytes


def test_every_preset_loads_and_is_listed_in_the_docs() -> None:
    docs = (REPO / "docs" / "workload.md").read_text()
    assert len(preset_names()) >= 5
    for name in preset_names():
        assert load_workload(name).budget_us > 0
        assert f"`{name}`" in docs, f"docs/workload.md does not list preset {name}"


def test_field_report_chunk_is_about_7_8_mib(tmp_path: Path, monkeypatch: MP, capsys: CAP) -> None:
    r = run_in_process(["workload", "qwen3-coder-480b-tp8"], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    assert "31 KiB" in r.stdout and "7.8 MiB" in r.stdout
    assert "local NVMe" in r.stdout


@pytest.mark.parametrize(
    ("config", "per_token_per_rank"),
    [
        # head_dim given and different from hidden/heads (Qwen3 style): head_dim wins
        (
            {
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "hidden_size": 64,
                "head_dim": 32,
                "torch_dtype": "float16",
            },
            2 * 2 * 2 * 32 * 2,
        ),
        # no num_key_value_heads: MHA, every attention head has KV
        (
            {
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "hidden_size": 64,
                "torch_dtype": "float32",
            },
            2 * 2 * 4 * 16 * 4,
        ),
        # newer configs say "dtype"; multimodal ones nest the text model
        (
            {
                "text_config": {
                    "num_hidden_layers": 3,
                    "num_attention_heads": 8,
                    "num_key_value_heads": 1,
                    "hidden_size": 512,
                    "dtype": "bfloat16",
                }
            },
            2 * 3 * 1 * 64 * 2,
        ),
        # MLA with a head_dim-less config
        (
            {
                "num_hidden_layers": 4,
                "kv_lora_rank": 8,
                "qk_rope_head_dim": 4,
                "num_attention_heads": 16,
                "hidden_size": 256,
                "torch_dtype": "bfloat16",
            },
            4 * 12 * 2,
        ),
    ],
    ids=["head_dim-wins", "mha", "text_config", "mla"],
)
def test_config_field_rules(
    config: dict[str, object], per_token_per_rank: int, tmp_path: Path, monkeypatch: MP, capsys: CAP
) -> None:
    path = write_workload(tmp_path, 'model = "config.json"\nlocal_read_gbps = 10\n', config)
    w = workload_json([str(path)], tmp_path, monkeypatch, capsys)
    assert w["kv_bytes_per_token_per_rank"] == per_token_per_rank


def test_inline_fields_fp8_override_and_ranks_per_node(
    tmp_path: Path, monkeypatch: MP, capsys: CAP
) -> None:
    path = write_workload(
        tmp_path,
        "layers = 62\nkv_heads = 8\nhead_dim = 128\ndtype = 'fp8'\ntp = 8\nranks_per_node = 4\n"
        "chunk_tokens = 512\nlocal_read_gbps = 25.0\nprefill_tokens_per_s = 1000000\n",
    )
    w = workload_json([str(path)], tmp_path, monkeypatch, capsys)
    assert w["kv_bytes_per_token_per_rank"] == 31_744 // 2
    assert w["chunk_bytes"] == 512 * 15_872
    assert w["node_chunk_bytes"] == 4 * 512 * 15_872
    # both baselines: the cheaper one is the budget (recompute 512 us < NVMe 10.4 ms)
    assert w["baseline"]["local_read_us"] == pytest.approx(4 * 512 * 15_872 * 8 / 25e3)
    assert w["budget_us"] == pytest.approx(512.0)
    assert w["baseline"]["kind"] == "recompute"


def test_break_even_rtt_and_per_request(tmp_path: Path, monkeypatch: MP, capsys: CAP) -> None:
    path = write_workload(
        tmp_path,
        "layers = 62\nkv_heads = 8\nhead_dim = 128\ndtype = 'bf16'\ntp = 8\n"
        "local_read_gbps = 25.0\nround_trips_per_chunk = 62\nprompt_tokens = 32000\n"
        "hit_ratio = 0.8\n",
    )
    w = workload_json([str(path)], tmp_path, monkeypatch, capsys)
    node_bits = 8 * 8_126_464 * 8
    budget = node_bits / 25e3
    rows = w["break_even"]
    assert isinstance(rows, list)
    row = next(b for b in rows if b["link_gbps"] == 100)
    assert row["wire_us"] == pytest.approx(node_bits / 100e3)
    assert row["rtt_us"] == pytest.approx((budget - node_bits / 100e3) / 62)
    assert row["safe_rtt_us"] == pytest.approx((budget / 2 - node_bits / 100e3) / 62)
    r = run_in_process(["workload", str(path)], tmp_path, monkeypatch, capsys)
    assert "Break-even RTT (62 serial round trips a chunk)" in r.stdout
    assert "A fetch = 62 serial round trips (lmcache) + the node's chunk once" in r.stdout
    assert "32,000-token prompt with 80% cache hits is 100 chunks" in r.stdout


# (case id, workload body, config.json or None, field the message must name, words)
BAD = [
    (
        "missing-layers",
        "kv_heads = 8\nhead_dim = 128\ndtype = 'bf16'\nlocal_read_gbps = 1\n",
        None,
        "workload.layers",
        "missing required field",
    ),
    (
        "tp-0",
        "layers = 4\nkv_heads = 8\nhead_dim = 128\ndtype = 'bf16'\ntp = 0\nlocal_read_gbps = 1\n",
        None,
        "workload.tp",
        "must be >= 1",
    ),
    (
        "unknown-dtype",
        "layers = 4\nkv_heads = 8\nhead_dim = 128\ndtype = 'int3'\nlocal_read_gbps = 1\n",
        None,
        "workload.dtype",
        "unknown dtype 'int3'",
    ),
    (
        "negative-throughput",
        "layers = 4\nkv_heads = 8\nhead_dim = 128\ndtype = 'bf16'\nprefill_tokens_per_s = -5\n",
        None,
        "workload.prefill_tokens_per_s",
        "must be a positive number",
    ),
    (
        "no-baseline",
        "layers = 4\nkv_heads = 8\nhead_dim = 128\ndtype = 'bf16'\n",
        None,
        "workload.prefill_tokens_per_s",
        "local_read_gbps",
    ),
    (
        "no-dtype-inline",
        "layers = 4\nkv_heads = 8\nhead_dim = 128\nlocal_read_gbps = 1\n",
        None,
        "workload.dtype",
        "missing",
    ),
    (
        "unknown-key",
        "layers = 4\nkv_heads = 8\nhead_dim = 128\ndtype = 'bf16'\n"
        "local_read_gbps = 1\nlayer = 3\n",
        None,
        "workload.layer",
        "unknown key",
    ),
    (
        "heads-vs-tp",
        "layers = 4\nkv_heads = 8\nhead_dim = 128\ndtype = 'bf16'\ntp = 3\nlocal_read_gbps = 1\n",
        None,
        "workload.tp",
        "8 KV heads cannot be split over 3",
    ),
    (
        "hit-ratio",
        "layers = 4\nkv_heads = 8\nhead_dim = 128\ndtype = 'bf16'\n"
        "local_read_gbps = 1\nhit_ratio = 1.5\n",
        None,
        "workload.hit_ratio",
        "must be <= 1",
    ),
    (
        "speedups",
        "layers = 4\nkv_heads = 8\nhead_dim = 128\ndtype = 'bf16'\n"
        "local_read_gbps = 1\nsafe_speedup = 0.5\n",
        None,
        "workload.safe_speedup",
        "must be >= unsafe_speedup",
    ),
    (
        "both-model-and-inline",
        "model = 'config.json'\nlayers = 4\nlocal_read_gbps = 1\n",
        LLAMA_70B,
        "workload.layers",
        "not both",
    ),
    (
        "model-missing",
        "model = 'nope.json'\nlocal_read_gbps = 1\n",
        None,
        "workload.model",
        "not a shipped model",
    ),
    (
        "config-no-layers",
        "model = 'config.json'\nlocal_read_gbps = 1\n",
        {k: v for k, v in LLAMA_70B.items() if k != "num_hidden_layers"},
        "config.json: num_hidden_layers",
        "missing required field",
    ),
    (
        "config-bad-dtype",
        "model = 'config.json'\nlocal_read_gbps = 1\n",
        {**LLAMA_70B, "torch_dtype": "int4"},
        "config.json: torch_dtype",
        "unknown dtype",
    ),
    (
        "config-zero-heads",
        "model = 'config.json'\nlocal_read_gbps = 1\n",
        {**LLAMA_70B, "num_key_value_heads": 0},
        "config.json: num_key_value_heads",
        "positive integer",
    ),
]


@pytest.mark.parametrize(
    ("body", "config", "field", "words"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_bad_workload_exits_2_naming_file_and_field(
    body: str,
    config: dict[str, object] | None,
    field: str,
    words: str,
    tmp_path: Path,
    monkeypatch: MP,
    capsys: CAP,
) -> None:
    path = write_workload(tmp_path, body, config)
    r = run_in_process(["workload", str(path)], tmp_path, monkeypatch, capsys)
    assert r.returncode == 2, r.stdout
    err = " ".join(r.stderr.split())
    assert field in err and words in err, err
    assert ("config.json" if field.startswith("config.json") else "workload.toml") in err


def test_unknown_preset_lists_the_presets(tmp_path: Path) -> None:
    r = netqual("workload", "llama-9000", cwd=tmp_path)
    assert r.returncode == 2
    err = " ".join(r.stderr.split())
    assert "llama-9000" in err and "llama-3.1-70b-tp8" in err


@given(
    layers=st.integers(1, 128),
    kv_heads=st.sampled_from([1, 2, 4, 8, 16, 32, 64]),
    head_dim=st.sampled_from([64, 80, 128, 256]),
    tp=st.sampled_from([1, 2, 4, 8, 16]),
    dtype=st.sampled_from(list(Dtype)),
)
def test_ranks_together_hold_at_least_the_model(
    layers: int, kv_heads: int, head_dim: int, tp: int, dtype: Dtype
) -> None:
    """Splitting never loses bytes; it only adds replicas when heads < ranks."""
    m = KvModel("m", layers, Attention.GQA, kv_heads=kv_heads, head_dim=head_dim)
    total = m.bytes_per_token(dtype)
    per_rank = m.bytes_per_token_per_rank(dtype, tp)
    if kv_heads >= tp:
        assert per_rank * tp == total
    else:
        assert per_rank * tp == total * (tp // kv_heads)


def test_every_workload_the_docs_name_is_a_preset_or_a_file() -> None:
    """Issue 36: docs/campaign.md showed `workload = "llama3-70b"`, which is no preset."""
    import re

    named = {
        (doc.name, m.group(1))
        for doc in (REPO / "docs").glob("*.md")
        for m in re.finditer(r'workload = "([^"]+)"', doc.read_text(encoding="utf-8"))
    }
    assert named, "the docs show a milestone workload"
    presets = {p.lower() for p in preset_names()}
    wrong = [(doc, w) for doc, w in named if "/" not in w and not w.endswith(".toml")
             and w.lower() not in presets]  # fmt: skip
    assert wrong == []


@pytest.mark.parametrize("width", [80, 90, 100, 110])
def test_tier_table_headers_and_cells_are_whole_at_80_to_110_columns(width: int) -> None:
    # issue: at 80-110 columns the tier table cut its headers ("speedup/…", "safe/mar…")
    # and spoke jargon ("@200/@500 us") before any explanation
    import io

    from factories import make_results

    from netqual.render.console import LiteralConsole
    from netqual.render.workload import print_workload_results
    from netqual.workload.judge import apply

    res = make_results(8, slow_paths=[("gpu01", "stor02", 900.0)])
    res = apply(res, load_workload("qwen3-coder-480b-tp8"))
    console = LiteralConsole(width=width)
    console.file = io.StringIO()
    print_workload_results(console, res)
    out = console.file.getvalue()
    table = out[out.index("by tier (medians") : out.index("tier: same rack, across racks")]
    assert "…" not in table and "@" not in out, table
    words = " ".join(table.split())
    for word in ("tier", "p99", "RTT", "fetch", "speedup", "worst", "per", "request",
                 "were", "200", "500", "safe", "marg", "unsafe"):  # fmt: skip
        assert f" {word} " in f" {words} ", (word, table)
    for tier in ("same-rack", "cross-rack"):
        assert any(line.split()[:1] == [tier] for line in table.splitlines()), table
    assert all(len(line) <= width for line in out.splitlines())
    assert "if RTT were 200 / 500 us: the speedup had the tier's p99 RTT sat" in " ".join(
        out.split()
    )
