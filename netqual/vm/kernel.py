"""The guest's kernel: Debian's ``linux-image-amd64`` package, unpacked into a cache directory.

Nothing is installed on the host: ``apt-get download`` fetches the .deb through the
configured package archive, ``dpkg-deb -x`` unpacks it next to the cache and ``depmod -b``
indexes its modules there. The unpacked tree is reused until the package changes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from netqual.base.errors import GuestError

META_PACKAGE = "linux-image-amd64"
CACHE_ENV = "NETQUAL_VM_CACHE"
_DEPENDS = re.compile(r"^\s*Depends:\s*(linux-image-\S+)", re.MULTILINE)
_READY = "unpacked.ok"  # written last: a tree without it is an interrupted unpack


@dataclass(frozen=True)
class Kernel:
    """An unpacked kernel package: the image to boot and its (depmod-indexed) modules."""

    package: str  # e.g. linux-image-6.1.0-57-amd64
    release: str  # uname -r inside the guest, e.g. 6.1.0-57-amd64
    vmlinuz: Path
    modules_dir: Path  # .../lib/modules/<release>

    def module_path(self, name: str) -> Path | None:
        """The .ko file of module ``name`` (dashes and underscores are the same)."""
        wanted = name.replace("-", "_")
        for line in (self.modules_dir / "modules.dep").read_text().splitlines():
            rel = line.split(":", 1)[0]
            if Path(rel).name.removesuffix(".ko").replace("-", "_") == wanted:
                return self.modules_dir / rel
        return None

    def load_order(self, names: list[str]) -> list[Path]:
        """The .ko files to insmod, dependencies first, for ``names`` (modules.dep closure)."""
        deps: dict[str, list[str]] = {}
        for line in (self.modules_dir / "modules.dep").read_text().splitlines():
            rel, _, rest = line.partition(":")
            deps[rel] = rest.split()
        order: list[str] = []

        def visit(rel: str) -> None:
            if rel in order:
                return
            for dep in deps.get(rel, []):
                visit(dep)
            order.append(rel)

        for name in names:
            path = self.module_path(name)
            if path is None:
                raise GuestError(f"kernel {self.release} has no module {name!r}")
            visit(str(path.relative_to(self.modules_dir)))
        return [self.modules_dir / rel for rel in order]


def default_cache_dir() -> Path:
    """``$NETQUAL_VM_CACHE``, else ``$XDG_CACHE_HOME/netqual/vm`` (``~/.cache/netqual/vm``)."""
    if env := os.environ.get(CACHE_ENV):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "netqual" / "vm"


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    # depmod lives in /usr/sbin, which a user's PATH may lack.
    exe = shutil.which(cmd[0]) or shutil.which(cmd[0], path="/usr/sbin:/sbin")
    if exe is None:
        raise GuestError(f"`{cmd[0]}` is not installed (needed to unpack the guest kernel)")
    proc = subprocess.run([exe, *cmd[1:]], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise GuestError(f"`{' '.join(cmd)}` failed: {' / '.join(detail)}")
    return proc.stdout


def resolve_package(meta: str = META_PACKAGE) -> str:
    """The versioned image package the meta package depends on (linux-image-6.1.0-57-amd64)."""
    text = _run(["apt-cache", "depends", meta])
    m = _DEPENDS.search(text)
    if not m:
        raise GuestError(
            f"apt knows no package {meta!r} with a linux-image dependency; "
            "run `apt-get update` (Debian/Ubuntu archive needed)"
        )
    return m.group(1)


def _from_tree(package: str, root: Path) -> Kernel:
    images = sorted((root / "boot").glob("vmlinuz-*"))
    if not images:
        raise GuestError(f"{package} holds no boot/vmlinuz-*")
    release = images[-1].name.removeprefix("vmlinuz-")
    return Kernel(package, release, images[-1], root / "lib" / "modules" / release)


def cached_kernel(cache_dir: Path | None = None, package: str | None = None) -> Kernel | None:
    """The unpacked kernel in the cache (``package``, else the newest there), or None."""
    cache = cache_dir or default_cache_dir()
    candidates = [cache / package] if package else sorted(cache.glob("linux-image-*"))
    for tree in reversed(candidates):
        if (tree / _READY).is_file():
            return _from_tree(tree.name, tree)
    return None


def fetch_kernel(cache_dir: Path | None = None, meta: str = META_PACKAGE) -> Kernel:
    """Download and unpack the current kernel package into the cache (once per version)."""
    cache = cache_dir or default_cache_dir()
    package = resolve_package(meta)
    if found := cached_kernel(cache, package):
        return found
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{package}.", dir=cache) as tmp_name:
        tmp = Path(tmp_name)
        os.chmod(tmp, 0o755)  # apt's download user must be able to write here
        _run(["apt-get", "download", "-q", package], cwd=tmp)
        debs = sorted(tmp.glob("*.deb"))
        if not debs:
            raise GuestError(f"apt-get download {package} left no .deb")
        tree = tmp / "tree"
        _run(["dpkg-deb", "-x", str(debs[0]), str(tree)])
        debs[0].unlink()
        kernel = _from_tree(package, tree)
        _run(["depmod", "-b", str(tree), kernel.release])
        (tree / _READY).write_text(f"{package}\n")
        final = cache / package
        if final.exists():
            shutil.rmtree(final)
        tree.rename(final)
    found = cached_kernel(cache, package)
    assert found is not None
    return found
