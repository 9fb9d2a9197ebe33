#!/usr/bin/env python3
"""Generates the Grafana dashboards: dashboards/<name>.json, and the same bytes in
charts/skiff/files/dashboards/ (helm cannot read files outside the chart).

    python3 dashboards/generator/generate.py          # write them
    python3 dashboards/generator/generate.py --check  # exit 1 if a committed copy is stale

`cargo xtask generate` runs the first, `cargo xtask check` the second. Run with any
python3: without the pinned grafana-foundation-sdk importable, it re-runs itself with the
venv scripts/install-deps.sh made (named after requirements.txt's pin).
"""

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUTPUTS = [ROOT / "dashboards", ROOT / "charts/skiff/files/dashboards"]


def pinned_version():
    for line in (HERE / "requirements.txt").read_text().splitlines():
        if line.startswith("grafana-foundation-sdk=="):
            return line.split("==", 1)[1].strip()
    sys.exit("generate.py: requirements.txt pins no grafana-foundation-sdk")


def sdk_python():
    cache = os.environ.get("SKIFF_TOOLS_CACHE") or os.path.expanduser("~/.cache/skiff-tools")
    return Path(cache) / f"grafana-foundation-sdk-{pinned_version().replace('!', '-')}" / "bin/python"


def ensure_sdk():
    """Runs this script again under the venv's python unless the pinned SDK is here: a
    different SDK version would write a different schema."""
    from importlib import metadata

    try:
        if metadata.version("grafana-foundation-sdk") == pinned_version():
            return
    except metadata.PackageNotFoundError:
        pass
    python = sdk_python()
    if os.environ.get("SKIFF_DASHBOARDS_REEXEC") or not python.exists():
        sys.exit(
            f"generate.py: grafana-foundation-sdk=={pinned_version()} is not installed "
            f"(expected {python}); run scripts/install-deps.sh"
        )
    os.environ["SKIFF_DASHBOARDS_REEXEC"] = "1"
    os.execv(python, [str(python), __file__, *sys.argv[1:]])


def render():
    """{file name: JSON text} for every dashboard."""
    sys.dont_write_bytecode = True  # no __pycache__ in the repository
    sys.path.insert(0, str(HERE))
    from grafana_foundation_sdk.cog.encoder import JSONEncoder

    import operator_dashboard
    import overview
    import pools
    import slo

    out = {}
    for name, module in [
        ("skiff-overview", overview),
        ("skiff-backend-pools", pools),
        ("skiff-slo", slo),
        ("skiff-operator", operator_dashboard),
    ]:
        # Sorted keys and a final newline: the output depends on the code only, so the
        # staleness check can compare bytes.
        out[f"{name}.json"] = json.dumps(module.build(), cls=JSONEncoder, indent=2, sort_keys=True) + "\n"
    return out


def main():
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] not in ([], ["--check"]):
        sys.exit(__doc__)
    ensure_sdk()
    rendered = render()
    stale = []
    for folder in OUTPUTS:
        present = {p.name for p in folder.glob("*.json")} if folder.exists() else set()
        for name, text in rendered.items():
            path = folder / name
            current = path.read_text() if path.exists() else None
            if current == text:
                continue
            if check:
                stale.append(str(path.relative_to(ROOT)))
            else:
                folder.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
        # A dashboard the generator no longer makes must not linger (nor ship in the chart).
        for name in sorted(present - rendered.keys()):
            if check:
                stale.append(f"{(folder / name).relative_to(ROOT)} (no longer generated)")
            else:
                (folder / name).unlink()
    if stale:
        sys.exit("generate.py: stale dashboards (cargo xtask generate):\n  " + "\n  ".join(stale))
    print(f"dashboards: {len(rendered)} " + ("current" if check else "written") + f" in {len(OUTPUTS)} places")


if __name__ == "__main__":
    main()
