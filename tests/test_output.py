"""Every file wireup writes goes through :func:`audit.output.write_output`: a regular file is replaced
atomically with umask permissions, a character device or FIFO is written in place and stays what it
was, a folder or a missing folder is a one-sentence usage error (exit 2), and a path from the
configuration may not leave the project root. An internal error exits 3, without a traceback unless
asked for."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from audit.cli import main
from audit.errors import ExitCode, OutputError, UsageError
from audit.output import current_umask, write_output

REPO = Path(__file__).resolve().parents[1]
GOOD = REPO / "tests" / "data" / "rules" / "SHAPE_MISMATCH" / "good"

# (command line before -o, what the output must start with) for every command with an --output of text
COMMANDS = [
    (["check", "--root", str(GOOD), "--select", "schema", "--format", "json"], "{"),
    (["graph", "--root", str(GOOD), "--schedule", "forward"], "%% schedule forward"),
    (["layout", "diff", "--root", str(GOOD), str(GOOD / "contracts"), str(GOOD / "contracts")], "wireup layout diff:"),
]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield 0o027
    os.umask(old)


def read_fifo(path: Path, sink: list[bytes]) -> threading.Thread:
    """A thread that opens the FIFO for reading and collects everything written to it."""

    def reader() -> None:
        with open(path, "rb") as fh:
            sink.append(fh.read())

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("argv,start", COMMANDS, ids=[c[0][0] + ("-" + c[0][1] if c[0][0] == "layout" else "") for c in COMMANDS])
def test_output_onto_a_fifo_writes_through_it_and_leaves_it_a_fifo(argv, start, tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    t = read_fifo(fifo, got)
    rc, _, err = run(capsys, *argv, "-o", str(fifo))
    t.join(timeout=30)
    assert rc == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got and got[0].decode("utf-8").lstrip().startswith(start)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temporary file left beside it


def make_null_device(path: Path) -> None:
    """A character device node like /dev/null (major 1, minor 3); skips where the test may not make one."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot create a character device node here ({exc.strerror}); needs root or CAP_MKNOD")
    try:  # a node on a nodev mount cannot be opened: then there is nothing to test either
        os.close(os.open(path, os.O_WRONLY))
    except OSError as exc:
        pytest.skip(f"the character device node cannot be opened here ({exc.strerror}), e.g. a nodev mount")


@pytest.mark.parametrize("argv,start", COMMANDS, ids=[c[0][0] + ("-" + c[0][1] if c[0][0] == "layout" else "") for c in COMMANDS])
def test_output_onto_a_character_device_leaves_the_device(argv, start, tmp_path: Path, capsys) -> None:
    node = tmp_path / "null"
    make_null_device(node)
    before = os.lstat(node)
    rc, _, err = run(capsys, *argv, "-o", str(node))
    assert rc == 0, err
    after = os.lstat(node)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == os.makedev(1, 3)
    assert (after.st_ino, stat.S_IMODE(after.st_mode)) == (before.st_ino, stat.S_IMODE(before.st_mode))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]


@pytest.mark.parametrize("argv,start", COMMANDS, ids=[c[0][0] + ("-" + c[0][1] if c[0][0] == "layout" else "") for c in COMMANDS])
def test_output_onto_a_folder_is_one_sentence_and_exit_2(argv, start, tmp_path: Path, capsys) -> None:
    rc, out, err = run(capsys, *argv, "-o", str(tmp_path))
    assert (rc, out) == (2, "")
    assert err == f'error: --output "{tmp_path}" is a folder; give the path of a file.\n'
    assert list(tmp_path.iterdir()) == []


def test_output_through_a_missing_folder_is_a_usage_error(tmp_path: Path, capsys) -> None:
    target = tmp_path / "no" / "such" / "out.json"
    rc, out, err = run(capsys, *COMMANDS[0][0], "-o", str(target))
    assert (rc, out) == (2, "")
    assert err == f'error: --output "{target}" cannot be written: the folder "{target.parent}" does not exist.\n'
    assert not (tmp_path / "no").exists()


def test_output_into_an_unwritable_folder_is_a_usage_error(tmp_path: Path, capsys) -> None:
    if os.geteuid() != 0:
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o555)
        why = "Permission denied"
    elif Path("/proc/self").is_dir():  # root writes into any mode-protected folder; /proc takes no new files
        folder, why = Path("/proc"), None
    else:
        pytest.skip("running as root without /proc: no folder here refuses a new file")
    target = folder / "wireup-out.json"
    try:
        rc, out, err = run(capsys, *COMMANDS[0][0], "-o", str(target))
    finally:
        if folder != Path("/proc"):
            folder.chmod(0o755)
    assert (rc, out) == (2, "")
    assert err.startswith(f'error: --output "{target}" cannot be written (') and err.endswith(").\n") and err.count("\n") == 1
    if why:
        assert f"({why})" in err
    assert not target.exists()


def test_a_new_regular_file_gets_umask_permissions(tmp_path: Path, capsys, umask_027) -> None:
    target = tmp_path / "out.json"
    rc, _, err = run(capsys, *COMMANDS[0][0], "-o", str(target))
    assert rc == 0, err
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~0o027 == 0o640
    assert json.loads(target.read_text())["summary"]["errors"] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_an_existing_regular_file_is_replaced_and_keeps_its_mode(tmp_path: Path, umask_027) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    target.chmod(0o604)
    inode = target.stat().st_ino
    write_output(target, "new\n", explicit=True, root=None)
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o604
    assert target.stat().st_ino != inode  # replaced by a rename, never truncated in place


def test_a_symbolic_link_is_written_through(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    assert write_output(link, "new", explicit=True, root=None) == real.resolve()
    assert link.is_symlink() and real.read_text() == "new"


def test_umask_is_read_without_changing_it(umask_027) -> None:
    assert current_umask() == 0o027
    assert current_umask() == 0o027


def test_config_paths_stay_inside_the_root_but_an_explicit_output_may_leave_it(tmp_path: Path) -> None:
    root, outside = tmp_path / "project", tmp_path / "elsewhere"
    root.mkdir()
    outside.mkdir()
    with pytest.raises(OutputError) as info:
        write_output(outside / "report.md", "x", explicit=False, root=root, what='the configuration key "report"')
    assert str(info.value) == (
        f'"{outside / "report.md"}" (the configuration key "report") lies outside the project root "{root}"; paths from '
        "the configuration and the contracts must stay inside it (an --output on the command line may leave it)."
    )
    assert isinstance(info.value, UsageError) and info.value.exit_code == ExitCode.USAGE
    assert not (outside / "report.md").exists()
    # through a symbolic link inside the root, too
    (root / "reports").symlink_to(outside)
    with pytest.raises(OutputError, match="lies outside the project root"):
        write_output(root / "reports" / "report.md", "x", explicit=False, root=root)
    write_output(outside / "report.md", "x", explicit=True, root=root)
    assert (outside / "report.md").read_text() == "x"
    # a project path inside the root gets its folders made
    write_output(root / "a" / "b.md", "y", explicit=False, root=root)
    assert (root / "a" / "b.md").read_text() == "y"


def test_a_socket_is_refused(tmp_path: Path) -> None:
    import socket

    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        with pytest.raises(OutputError, match=r'is a socket; give the path of a regular file, a character device or a FIFO\.$'):
            write_output(path, "x", explicit=True, root=None)
    assert stat.S_ISSOCK(os.lstat(path).st_mode)


def test_report_output_onto_a_fifo(tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "report.md"
    os.mkfifo(fifo)
    got: list[bytes] = []
    t = read_fifo(fifo, got)
    rc, _, err = run(capsys, "report", "--root", str(GOOD), "--no-history", "-o", str(fifo))
    t.join(timeout=60)
    assert rc == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and got and got[0].startswith(b"<!-- Generated by `wireup report`")


def test_report_output_onto_a_folder_is_a_usage_error(tmp_path: Path, capsys) -> None:
    rc, out, err = run(capsys, "report", "--root", str(GOOD), "--no-history", "-o", str(tmp_path))
    assert (rc, out, err) == (2, "", f'error: --output "{tmp_path}" is a folder; give the path of a file.\n')
    rc, out, err = run(capsys, "report", "--root", str(GOOD), "--no-history", "--check", "-o", str(tmp_path))
    assert (rc, out) == (2, "")
    assert err == f'error: --check compares against a file, but "{tmp_path}" is a folder; give the path of the report.\n'


def test_init_output_onto_a_folder_is_a_usage_error(tmp_path: Path, capsys) -> None:
    rc, _, err = run(capsys, "init", "--root", str(GOOD), str(GOOD / "kernels" / "chain.cu"), "-o", str(tmp_path), "--force")
    assert rc == 2
    assert err.endswith(f'error: --output "{tmp_path}" is a folder; give the path of a file.\n')


# --- internal errors: exit 3, one line, the traceback only on request ---------------------------------------


def boom(args) -> int:
    raise RuntimeError("boom\nsecond line")


def test_an_internal_error_exits_3_with_one_line_and_no_traceback(monkeypatch, capsys) -> None:
    import audit.commands.rules as rules_cmd

    monkeypatch.delenv("WIREUP_DEBUG", raising=False)
    monkeypatch.setattr(rules_cmd, "run", boom)
    rc, out, err = run(capsys, "rules")
    assert rc == ExitCode.INTERNAL == 3
    assert out == ""
    assert err == (
        "wireup: internal error (RuntimeError: boom second line); this is a bug in wireup, not a finding: please report it "
        "on the wireup issue tracker with the traceback, which WIREUP_DEBUG=1 or --debug prints (exit 3).\n"
    )


@pytest.mark.parametrize("how", ["env", "flag-after", "flag-before"])
def test_the_debug_switch_prints_the_traceback(how: str, monkeypatch, capsys) -> None:
    import audit.commands.rules as rules_cmd

    monkeypatch.delenv("WIREUP_DEBUG", raising=False)
    monkeypatch.setattr(rules_cmd, "run", boom)
    argv = {"env": ["rules"], "flag-after": ["rules", "--debug"], "flag-before": ["--debug", "rules"]}[how]
    if how == "env":
        monkeypatch.setenv("WIREUP_DEBUG", "1")
    rc, _, err = run(capsys, *argv)
    assert rc == 3
    assert err.startswith("Traceback (most recent call last):") and "RuntimeError: boom" in err
    assert err.endswith("please report it on the wireup issue tracker with the traceback above (exit 3).\n")


def test_a_user_error_is_still_exit_2_and_findings_exit_1(capsys) -> None:
    assert run(capsys, "check", "--root", str(GOOD), "--select", "NO_SUCH_RULE")[0] == 2
    bad = REPO / "tests" / "data" / "rules" / "SHAPE_MISMATCH" / "bad"
    assert run(capsys, "check", "--root", str(bad), "--select", "SHAPE_MISMATCH")[0] == 1


def test_a_crash_in_a_subprocess_exits_3(tmp_path: Path) -> None:
    # the installed entry point, as CI runs it: a command that crashes inside wireup
    code = (
        "import sys, audit.commands.rules as r\n"
        "def run(args): raise KeyError('x')\n"
        "r.run = run\n"
        "from audit.cli import main\n"
        "sys.exit(main(['rules']))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "WIREUP_DEBUG"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 3
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("wireup: internal error (KeyError: 'x'); this is a bug in wireup")


def test_init_writes_through_a_fifo_without_force(tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "contracts.toml"
    os.mkfifo(fifo)
    got: list[bytes] = []
    t = read_fifo(fifo, got)
    rc, _, err = run(capsys, "init", "--root", str(GOOD), str(GOOD / "kernels" / "chain.cu"), "-o", str(fifo))
    t.join(timeout=30)
    assert rc == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and b"[[kernel]]" in got[0]


@pytest.mark.parametrize("argv,start", COMMANDS, ids=[c[0][0] + ("-" + c[0][1] if c[0][0] == "layout" else "") for c in COMMANDS])
def test_output_dash_is_standard_output(argv, start, tmp_path: Path, capsys, monkeypatch) -> None:
    """``-o -`` writes to standard output, as the convention goes; it wrote a file named "-" in the
    current folder (seen with ``wireup init -o -``)."""
    monkeypatch.chdir(tmp_path)
    rc, out, _err = run(capsys, *argv, "-o", "-")
    assert rc in (0, 1) and out.startswith(start)
    assert not (tmp_path / "-").exists()


def test_init_output_dash_prints_the_contracts(tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "k.cu").write_text('extern "C" __global__ void f(float* y, int n) { y[0] = n; }\n')
    (tmp_path / "wireup.toml").write_text("")
    monkeypatch.chdir(tmp_path)
    rc, out, _err = run(capsys, "init", "--root", str(tmp_path), str(tmp_path / "k.cu"), "-o", "-")
    assert rc == 0 and '[[kernel]]\nname = "f"' in out and not (tmp_path / "-").exists()
