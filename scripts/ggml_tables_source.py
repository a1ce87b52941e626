"""The IQ2 grid tables shared by the table generators (standard library only).

scripts/gen_ggml_tables.py expands the grids from gguf-py into src/formats/ggml_tables.cpp (the
host tables); scripts/gen_device_ggml_tables.py re-emits that file's numbers as device arrays in
src/device/ggml_grids.cuh. Both use this module for what the tables are (names, entry counts,
magnitudes), for checking a grid, for parsing the host file, for writing the C++ arrays and for the
write / --check command line, so the two generators cannot drift apart.
"""
import argparse
import pathlib
import re
import sys
from typing import Callable

REPO = pathlib.Path(__file__).resolve().parent.parent
HOST_TABLES = REPO / "src" / "formats" / "ggml_tables.cpp"
DEVICE_TABLES = REPO / "src" / "device" / "ggml_grids.cuh"

# ggml's grid magnitudes: every byte of a grid entry is one of these (gguf-py's grid_map).
MAGNITUDES = (0x08, 0x19, 0x2B)
# C++ symbol -> entries, in the order the files define them.
GRIDS = {"kIq2xxsGrid": 256, "kIq2xsGrid": 512}


def check_grid(where: str, name: str, grid: list[int], entries: int) -> None:
    """Exits with a message (prefixed by `where`) unless `grid` is `entries` distinct 8-byte codewords
    whose bytes are all ggml magnitudes."""
    if len(grid) != entries:
        sys.exit(f"{where}{name}: {len(grid)} entries, expected {entries}")
    for i, value in enumerate(grid):
        for j in range(8):
            if (value >> (8 * j)) & 0xFF not in MAGNITUDES:
                sys.exit(f"{where}{name}[{i}] byte {j} is not one of 8/25/43")
    if len(set(grid)) != entries:
        sys.exit(f"{where}{name} has repeated entries")


def parse_host_table(text: str, name: str, entries: int) -> list[int]:
    """The values of `const uint64_t name[entries] = {...};` in the host tables file, checked."""
    where = f"{HOST_TABLES}: "
    m = re.search(r"const\s+uint64_t\s+" + name + r"\[(\d+)\]\s*=\s*\{(.*?)\};", text, re.S)
    if not m:
        sys.exit(f"{where}no definition of {name}")
    if int(m.group(1)) != entries:
        sys.exit(f"{where}{name} is declared with {m.group(1)} entries, expected {entries}")
    values = [int(v, 16) for v in re.findall(r"0x([0-9a-fA-F]{16})", m.group(2))]
    if len(values) != entries:
        sys.exit(f"{where}{name} has {len(values)} initializers, expected {entries}")
    check_grid(where, name, values, entries)
    return values


def format_array(declaration: str, name: str, values: list[int], suffix: str = "") -> str:
    """`<declaration> name[N] = {` then four 16-digit hex values (each followed by `suffix`) a line."""
    lines = [f"{declaration} {name}[{len(values)}] = {{"]
    for row in range(0, len(values), 4):
        lines.append("    " + " ".join(f"0x{v:016x}{suffix}," for v in values[row : row + 4]))
    lines.append("};")
    return "\n".join(lines)


def generator_main(description: str, default_output: pathlib.Path, script: str, render: Callable[[], str]) -> None:
    """Writes render() to --output (default: the committed file), or with --check exits 1 if the
    file there differs from it."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="fail if the committed file differs")
    parser.add_argument("--output", type=pathlib.Path, default=default_output)
    args = parser.parse_args()
    text = render()
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            sys.exit(f"{args.output} is stale; run {script}")
        print(f"{args.output} is up to date")
        return
    args.output.write_text(text)
    print(f"wrote {args.output}")
