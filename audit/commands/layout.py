"""``wireup layout``: the ISV layout's fingerprint, its diff against a revision, its generated constants.

    wireup layout fingerprint [--verbose] [PATH]
    wireup layout diff [--against REV | OLD NEW] [--format text|json|github|junit|sarif] [--output FILE]
    wireup layout generate [--check]

``diff`` exits 0 when old checkpoints still load (or the new contracts acknowledge the shift), 1 when
they break unacknowledged, 2 for a bad revision or unreadable contracts. ``generate --check`` exits 1
when a generated file is stale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import ExitCode, UsageError
from ._common import add_output_arguments, emit, root_of

NAME = "layout"
HELP = "ISV layout: fingerprint, diff against a git revision or other contracts, generated slot constants"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="layout_command", metavar="ACTION", required=True)

    fp = sub.add_parser("fingerprint", help="print the layout fingerprint (last line: 0x...)",
                        description="Print the ISV layout fingerprint; the last line is the fingerprint alone.")  # fmt: skip
    fp.add_argument("--verbose", "-v", action="store_true", help="print the canonical serialisation that is hashed (slot names as comments)")
    fp.add_argument("path", nargs="?", metavar="PATH", help="a contract file or folder (default: the project's contracts)")
    _add_root(fp)

    diff = sub.add_parser("diff", help="classify layout changes and their effect on checkpoints",
                          description="Compare the layout with a git revision (--against REV, default HEAD) or two contract files or folders (OLD NEW).")  # fmt: skip
    diff.add_argument("--against", metavar="REV", help="a git revision whose contracts are the old side (the work tree is the new side)")
    diff.add_argument("--or-upstream", action="store_true",
                      help="where this clone lacks the --against revision, compare with the merge base of HEAD and its upstream branch (said on stderr)")  # fmt: skip
    diff.add_argument("paths", nargs="*", metavar="OLD NEW", help="two contract files or folders: old, then new")
    add_output_arguments(diff)
    _add_root(diff)

    gen = sub.add_parser("generate", help="write the slot-constant files (CUDA, Python, Rust)",
                         description="Render the slot constants from the layout and write the files that changed.")  # fmt: skip
    gen.add_argument("--check", action="store_true", help="write nothing; exit 1 when any generated file is stale")
    _add_root(gen)


def _add_root(p: argparse.ArgumentParser) -> None:
    # SUPPRESS keeps a --root given before the action ("wireup layout --root X diff") from being reset.
    p.add_argument("--root", metavar="DIR", default=argparse.SUPPRESS, help="project root (default: found from the current folder)")
    from ..cli import add_debug_argument

    add_debug_argument(p)


def run(args: argparse.Namespace) -> int:
    if args.layout_command == "fingerprint":
        return _fingerprint(args)
    if args.layout_command == "diff":
        return _diff(args)
    return _generate(args)


def _layout_from_path(path: Path, root: Path):
    """The layout declared by a contract file, or by the files of a contract folder."""
    from ..layout.gitrev import layout_from_texts
    from ..load import find_contract_files
    from ..untrusted import CONTRACT_LIMIT, UnreadableFile, inside, read_bytes, resolve

    if resolve(path) is None:
        raise UsageError(f'"{_display(path, root)}" is a symbolic link loop, neither a contract file nor a folder of contract files.')
    if path.is_dir():
        files, skipped = find_contract_files(path)
        if skipped:
            raise UsageError(f'"{_display(skipped[0][0], root)}" {skipped[0][1]}; its contract files were not read.')
    elif path.is_file():
        files = [path]
    else:
        raise UsageError(f'"{path}" is neither a contract file nor a folder of contract files.')
    # the project's files stay inside its root; a path given on the command line outside it is the
    # user's own choice, and is read within its own folder
    base = root if inside(path, root) else (path if path.is_dir() else path.parent)
    texts = {}
    for f in files:
        try:
            texts[_display(f, root)] = read_bytes(f, base, CONTRACT_LIMIT).decode("utf-8")
        except UnreadableFile as exc:
            raise UsageError(f'"{_display(f, root)}" {exc}; contract files are regular files inside the project root.') from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f'"{_display(f, root)}" cannot be read ({exc}).') from None
    return layout_from_texts(texts, root, f'"{_display(path, root)}"')


def _display(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root).as_posix()
    except (ValueError, RuntimeError, OSError):  # outside the root, or a loop of links
        return path.as_posix()


def _fingerprint(args: argparse.Namespace) -> int:
    from ..config import load_config
    from ..layout.fingerprint import canonical_layout, fingerprint

    cfg = load_config(root_of(args))
    layout = _layout_from_path(Path(args.path) if args.path else cfg.contracts_dir, cfg.root)
    fp = fingerprint(layout)
    if args.verbose:
        out = canonical_layout(layout, names=True)
    else:
        real = sum(1 for s in layout.slots if s.role != "padding")
        if layout.fingerprint is None:
            pin = "no pin in [isv]"
        elif layout.fingerprint == fp:
            pin = "matches the pin in [isv]"
        else:
            pin = f"the pin in [isv] is {layout.fingerprint} (stale)"
        out = f"{layout.loc.file}: {len(layout.slots)} slots ({real} not padding), total_dim {layout.total_dim}, dtype {layout.dtype}; {pin}\n"
    emit(out + fp + "\n", None)
    return ExitCode.CLEAN


def _diff(args: argparse.Namespace) -> int:
    from ..config import load_config
    from ..layout.diff import diff_layouts
    from ..layout.gitrev import load_layout_at_revision

    cfg = load_config(root_of(args))
    if args.against is not None and args.paths:
        raise UsageError("Give either --against REV or two contract paths OLD NEW, not both.")
    if args.paths and len(args.paths) != 2:
        raise UsageError(f"Expected two contract files or folders (OLD NEW), found {len(args.paths)}.")
    if args.paths:
        old = _layout_from_path(Path(args.paths[0]), cfg.root)
        new = _layout_from_path(Path(args.paths[1]), cfg.root)
    else:
        rev = args.against or "HEAD"
        if args.or_upstream:
            from ..layout.gitrev import base_or_upstream

            rev, note = base_or_upstream(cfg.root, rev)
            if note:
                print(note, file=sys.stderr)
        old = load_layout_at_revision(rev, cfg.root, cfg.contracts)
        new = _layout_from_path(cfg.contracts_dir, cfg.root)
    d = diff_layouts(old, new)
    emit(render_diff(d, args.format), args.output)
    return d.exit_code


def render_diff(d, fmt: str) -> str:
    """The diff's findings in ``fmt`` through the shared printers, plus the verdict, fingerprints and
    migrator: closing lines in text, a ``layout`` object in JSON and SARIF, a notice for GitHub and
    testsuite properties in JUnit."""
    import json

    from ..layout.diff import CHANGE_KINDS
    from ..printers import render

    tool = "wireup layout diff"
    out = render(d.check_result(), fmt, tool)
    if fmt == "text":
        return out + "\n".join(d.summary_lines()) + "\n"
    if fmt == "json":
        doc = json.loads(out)
        doc["layout"] = d.as_dict()
        return json.dumps(doc, indent=2) + "\n"
    if fmt == "sarif":
        doc = json.loads(out)
        run = doc["runs"][0]
        rules = run["tool"]["driver"]["rules"]
        level = {"compatible": "note", "migratable": "error", "incompatible": "error"}
        for k in CHANGE_KINDS.values():
            rules.append({
                "id": k.id,
                "name": "".join(part.capitalize() for part in k.id.split("_")),
                "shortDescription": {"text": k.what},
                "fullDescription": {"text": f"{k.what} {k.effect} Verdict: {k.verdict}."},
                "defaultConfiguration": {"level": level[k.verdict]},
                "properties": {"category": "layout", "tags": ["layout"], "verdict": k.verdict},
            })  # fmt: skip
        index = {r["id"]: i for i, r in enumerate(rules)}
        for res in run["results"]:
            res["ruleIndex"] = index[res["ruleId"]]
        run["properties"] = {"layout": d.as_dict()}
        return json.dumps(doc, indent=2) + "\n"
    if fmt == "github":
        summary = "%0A".join(line.replace("%", "%25") for line in d.summary_lines())
        level = "error" if d.breaking else "notice"
        return out + f"::{level} title=ISV layout {d.verdict}::{summary}\n"
    if fmt == "junit":
        import xml.etree.ElementTree as ET

        suite = ET.fromstring(out.encode("utf-8"))
        props = ET.Element("properties")
        for name, value in (("verdict", d.verdict), ("old_fingerprint", d.old_fingerprint), ("new_fingerprint", d.new_fingerprint), ("migrator", d.migrator_line())):
            ET.SubElement(props, "property", name=name, value=value)
        suite.insert(0, props)
        ET.indent(suite)
        return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
    return out


def _generate(args: argparse.Namespace) -> int:
    from ..api import load_project
    from ..layout.codegen import generate, generated_files

    cfg, cs = load_project(root_of(args))
    if cs.isv is None:
        raise UsageError(f'The contracts under "{cfg.contracts}" declare no [isv] table, so there are no slot constants to generate.')
    from ..rules.layout import refuse_huge_layout

    too_large = refuse_huge_layout(cs.isv)
    if too_large:
        raise UsageError(f"{cs.isv.loc}: {too_large}")
    _require_identifiers(cs.isv)
    files = generated_files(cfg.generated)
    results = generate(cfg.root, cs.isv, files, cs.isv.loc.file or cfg.contracts, check=args.check)
    stale = 0
    for f, status in results:
        if status in ("stale", "missing"):
            stale += 1
            print(f"{f.path}: {status}; run `wireup layout generate`.")
        else:
            print(f"{f.path}: {status}.")
    if args.check and stale:
        print(f"wireup layout generate --check: {stale} of {len(results)} generated file(s) out of date.", file=sys.stderr)
        return ExitCode.FINDINGS
    return ExitCode.CLEAN


def _require_identifiers(layout) -> None:
    """Slot and reset-event names become constants in C, Python and Rust: each must be one whole
    identifier (a full match; a pattern ending in ``$`` lets "ROW_SCALE\\n" through, and the generated
    Python would not parse). Rule NAME_NOT_IDENTIFIER reports the same in ``wireup check``."""
    from ..names import is_identifier, shown, why_not_identifier

    for s in layout.slots:
        if not is_identifier(s.name):
            raise UsageError(f'{s.loc}: slot name "{shown(s.name)}" cannot become the constant {shown(s.name)}_INDEX ({why_not_identifier(s.name)}); expected ASCII letters, digits and underscores, not starting with a digit.')
    for i, ev in enumerate(layout.reset_events):
        if not is_identifier(ev):
            raise UsageError(f'{layout.loc.child("reset_events", i)}: reset event "{shown(ev)}" cannot become a constant ({why_not_identifier(ev)}); expected ASCII letters, digits and underscores, not starting with a digit.')
