"""The evidence hashes do not move: GPU evidence records are keyed by them.

``kernel_source_hash``, ``contract_hash`` and ``schedule_hashes`` (audit/evidence.py, audit/hashing.py) name
what a ``wireup verify`` run proved. A change that alters their values (a faster hash, a memo that hashes
something else) would silently turn every stored record stale, so the values of the shipped repository
are pinned here, and the memoized paths (``freshness``, repeated calls) are compared with the plain
definitions on the shipped contracts, the fixture projects and a synthetic project.

The values are pinned as a child process computes them; ``hashing.canonical`` writes a dim expression as
its text and sorts sets, so the values do not depend on the interpreter's string-hash seed (a test below
computes them under two seeds).

When a kernel source, a header or a contract of the shipped chain is edited on purpose, its hashes
change too: regenerate the tables below (the values ``kernel_source_hash``/``contract_hash``/
``schedule_hashes`` give for the new tree) in the same commit, and say so in its message.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from audit.api import load_project
from audit.compile import CODE_HASH_VERSION
from audit.evidence import EvidenceRecord, freshness, kernel_source_hash, schedule_hashes
from audit.hashing import canonical, contract_hash, files_hash, include_closure, source_hash

REPO = Path(__file__).resolve().parents[1]

# kernel -> (source hash, contract hash); schedule -> (source hash, contract hash), of the shipped tree
KERNELS = {
    "aux_label_scale_ema_update": (
        "cbf4a2823ccb34efb3720d74bbee56a731c9238ea56712ea0a2d220ee87a47ce",
        "efa1dbb703a5c9c3effaedda1701bcbcb590f4d06e29da941d225c862eb2120a",
    ),
    "aux_heads_loss_ema_update": (
        "cbf4a2823ccb34efb3720d74bbee56a731c9238ea56712ea0a2d220ee87a47ce",
        "44f49d50bcb208976642115faf15339b46a8cc5ef424bbbd672235f4a1a4becf",
    ),
    "aux_next_bar_forward": (
        "4f1af4240bf9fb7a57b8b6cda8736b32fe152c23e39118c2f90dbb7d6c632cf7",
        "eb55efeb0fa2d2f69d41942c9c83f43f03605bbf39c03bd02073aa2c11b9a626",
    ),
    "aux_next_bar_loss_reduce": (
        "1444e2d0a3e7a80bf56726d697152c12df2ca1f50820f5c983a5dfa444943f1c",
        "62c19dff23dbf80e5bef1418e82aeff09997b84f10b3cf89c8a228580b5d5c17",
    ),
    "aux_next_bar_backward": (
        "1133bf896bd47d19c66e18296df208e0c34810a82494777b2a29985a08329424",
        "e9d30282b9d6b06c5774710f6c4eb574878fff939ef55c140258d153b1e58229",
    ),
    "aux_next_bar_backward_store": (
        "1133bf896bd47d19c66e18296df208e0c34810a82494777b2a29985a08329424",
        "c80b4baa8ce613308785c07d283434737236a8dc621a28aa8dd58ae79218369d",
    ),
    "aux_param_grad_reduce": (
        "e2c43ab932d184aaabb083612c7bd671eee919da9bad9ae9c5c2f676628dd34b",
        "0c280d2439c6fa1d4992a67163fad802ccbe0f76d58883c6ea92dd395c7d3932",
    ),
    "aux_weight_grad_partial": (
        "370f71f79d8ee1f903c0a03e04d080e9ea423e00e151bf0fda316e5ecca53017",
        "ec6d074be12d3ad0b9664e6cef422375ae1cbf815ff528bf38ed974955083e58",
    ),
    "aux_weight_grad_partial_skinny": (
        "4b56a819a04dc9f06181fcb01c56a9aed21e18d61c906d5f368f77fe05dcea1e",
        "ec27e210b442d3bedcbcf9123c24ae8c5c31aff874ac27f21ce76b6560215399",
    ),
    "aux_weight_grad_finish": (
        "4b56a819a04dc9f06181fcb01c56a9aed21e18d61c906d5f368f77fe05dcea1e",
        "08d46accc54e1f9dcc2f69b57c3ff9e1b35b7df19ebc9a70c17798140d73c944",
    ),
    "aux_trade_outcome_forward": (
        "4f1af4240bf9fb7a57b8b6cda8736b32fe152c23e39118c2f90dbb7d6c632cf7",
        "e709b809d5305bb5dcb0be1b7f3b11c08ce10c703d43b075bd4cd561a86c4a8e",
    ),
    "aux_trade_outcome_loss_reduce": (
        "aaf60569e0dad613bd42b79955d9c8d28803ed4eb5a279b016d8896a3edf9443",
        "ab77e38a3ac6d16760adc2aeed1a900bf5a5eb20eacf991cbc147ef9b827f75c",
    ),
    "aux_trade_outcome_backward": (
        "d6a558290f1efe30e02b7f23f02f24488b215d9ba2bebdf5c1bf27989e2853f3",
        "d239a2246ec2df640f0d0ca2c459692ec870feabbff3a08b035c76a684e368c0",
    ),
    "aux_trunk_forward": (
        "1164a5489018d80ad960e2532da1ebc8ec19422fa4f6e1e25d8f9fb1b7118496",
        "2b0db5c891beb93c02f36dde2491d0e8408e792806e29b6438d54e9918372e90",
    ),
    "aux_trunk_backward": (
        "2beb3e0bf66963e52c75d2a713ef933dce230ed4741606ca7d43f99621addd0e",
        "8a8acdd6d29221c09325fae89cbb7529ebe7d3a6c9ca2d58566a97885cf71470",
    ),
    "aux_weight_grad_partial_masked": (
        "385b259786e04a4cec28894c238bb40ca1a443dcdd9e98aafe905c9f3b364ec5",
        "c006353c8705fde0fe634d166d1c1cb20875893c12e3a7c6d03349fde72efeb7",
    ),
    "strided_gather": (
        "982e4a47ac4a9d85957c0df9f3f28faa0c0b5d88755be54c634539fa5971d3e1",
        "0ca59dea759514d48645dcce1a015b441ab1085fd79368bf5147ed2e82d18131",
    ),
    "trade_outcome_label": (
        "a6a78063f298d7390b60d10bf10fa8d2b14b278f1bbe01582e1becf9c46a9350",
        "37167c35bdb4e33072c2f0e82ce1b97376ef419f9f5c467c7ca49364203c5114",
    ),
}
SCHEDULES = {
    "aux_heads_forward": (
        "4165567b19d425b11c9cbd13cf0d01b44f009c096dff798216e89eb1c7d2eed6",
        "c144b65b0cf4c678198b2bb6d912fc56d95beca994dff00602b4336515ccfdee",
    ),
    "aux_heads_backward": (
        "f1950b4b9d8898c1c462bd72c417b2269d6d6662c697d20d2877a7c86226353e",
        "4603408c945af015fc3749a1919038ab4554de49eaee85385b7f8128a8e1d7f6",
    ),
    "aux_heads_backward_fused": (
        "4ff61453c4e4f363908cba592706e35242dec988264ada8e4f8cf1f12bc7a5ba",
        "0a354d77c09aaea592cc9d01706adad554436bda128680786a40602479f25928",
    ),
}
ISV = "2cb6cb0cb6fab631bd5b128c2179d0a08f2d7d9322eaca760ea525ba3e85acd4"


# ---------------------------------------------------------------------------------------------------
# the plain definitions (what audit/evidence.py computed before any memo), for comparison


def _plain_schedule_hashes(cs, cfg, schedule) -> tuple[str, str]:
    root = cs.root
    kernels = [cs.kernel_map[s.launch] for s in schedule.launches if s.launch in cs.kernel_map]
    paths: dict[Path, None] = {}
    for k in kernels:
        for p in include_closure(root / k.source, [cfg.path(d) for d in cfg.include_dirs]):
            paths[p] = None
    src = files_hash(sorted(paths, key=lambda p: p.as_posix()), root)
    unique = {k.name: k for k in kernels}
    bufs: set[str] = set()
    for step in schedule.steps:
        if step.zero:
            bufs.add(step.zero)
        for _, b in step.bind:
            if b.buffer:
                bufs.add(b.buffer)
    con = contract_hash(
        [schedule, [unique[n] for n in sorted(unique)], cs.isv, [cs.buffer_map[b] for b in sorted(bufs) if b in cs.buffer_map]]
    )
    return src, con


def _plain_kernel_source_hash(cs, cfg, kernel) -> str:
    return source_hash(cs.root / kernel.source, [cfg.path(d) for d in cfg.include_dirs], cs.root)


def _plain_contract_hash(obj) -> str:
    return hashlib.sha256(json.dumps(canonical(obj), sort_keys=True, default=str).encode()).hexdigest()


def _assert_same_as_plain(root: Path) -> None:
    cfg, cs = load_project(root)
    for _ in range(2):  # a second round hits whatever the first one memoized
        for k in cs.kernels:
            assert contract_hash(k) == _plain_contract_hash(k), k.name
            if (cs.root / k.source).is_file():
                assert kernel_source_hash(cs, cfg, k) == _plain_kernel_source_hash(cs, cfg, k), k.name
        for s in cs.schedules:
            assert schedule_hashes(cs, cfg, s) == _plain_schedule_hashes(cs, cfg, s), s.name
    assert contract_hash(cs.isv) == _plain_contract_hash(cs.isv)


# ---------------------------------------------------------------------------------------------------


_CHILD = r"""
import json, sys
from pathlib import Path
from audit.api import load_project
from audit.evidence import EvidenceRecord, freshness, kernel_source_hash, schedule_hashes
from audit.hashing import contract_hash
cfg, cs = load_project(Path(sys.argv[1]))
out = {"kernels": {}, "schedules": {}, "isv": contract_hash(cs.isv)}
for k in cs.kernels:
    out["kernels"][k.name] = [kernel_source_hash(cs, cfg, k), contract_hash(k)]
for s in cs.schedules:
    out["schedules"][s.name] = list(schedule_hashes(cs, cfg, s))
# what freshness() (the memoized path of check and report) accepts: a record of exactly these hashes
from audit.compile import CODE_HASH_VERSION
built = dict(build_flags=["-O3", "-lineinfo", "-std=c++17"], arch=cfg.arch, code_hashes={"-": "-"}, code_hash_version=CODE_HASH_VERSION)
recs = [EvidenceRecord(n, "kernel", "pycuda", "pass", *h, date="2026-01-01", **built) for n, h in out["kernels"].items()]
recs += [EvidenceRecord(n, "schedule", "pycuda", "pass", *h, date="2026-01-01", **built) for n, h in out["schedules"].items()]
out["freshness"] = sorted({f.status for f in freshness(cs, cfg, recs).values()})
print(json.dumps(out))
"""


def _shipped_under_seed(seed: str) -> dict:
    env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-c", _CHILD, str(REPO)], capture_output=True, text=True, env=env, timeout=120, cwd=REPO)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def shipped() -> dict:
    return _shipped_under_seed("0")


def test_hashes_do_not_depend_on_the_string_hash_seed(shipped):
    """A record written by one process must match in every other: no set order leaks into a hash."""
    assert _shipped_under_seed("12345") == shipped


def test_shipped_kernel_hashes_are_pinned(shipped):
    assert {k: tuple(v) for k, v in shipped["kernels"].items()} == KERNELS


def test_shipped_schedule_hashes_are_pinned(shipped):
    assert {k: tuple(v) for k, v in shipped["schedules"].items()} == SCHEDULES
    assert shipped["isv"] == ISV


def test_freshness_matches_the_pinned_hashes(shipped):
    """freshness() keys records by exactly the hashes schedule_hashes / kernel_source_hash give."""
    assert shipped["freshness"] == ["verified"]


def test_freshness_in_process_matches_the_plain_definitions():
    cfg, cs = load_project(REPO)
    built = dict(build_flags=["-O3", "-lineinfo", "-std=c++17"], arch=cfg.arch, code_hashes={"-": "-"}, code_hash_version=CODE_HASH_VERSION)
    records = []
    for k in cs.kernels:
        records.append(EvidenceRecord(k.name, "kernel", "pycuda", "pass", _plain_kernel_source_hash(cs, cfg, k), _plain_contract_hash(k), date="2026-01-01", **built))
    for s in cs.schedules:
        records.append(EvidenceRecord(s.name, "schedule", "pycuda", "pass", *_plain_schedule_hashes(cs, cfg, s), date="2026-01-01", **built))
    for _ in range(2):
        status = freshness(cs, cfg, records)
        assert len(status) == len(cs.kernels) + len(cs.schedules)
        assert {f.status for f in status.values()} == {"verified"}


@pytest.mark.parametrize("project", [".", "tests/data/generality", "tests/data/report/mini"])
def test_memoized_hashes_equal_the_plain_definitions(project):
    root = REPO / project
    _assert_same_as_plain(root)


def test_memoized_hashes_equal_the_plain_definitions_synthetic(tmp_path):
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from synth_contracts import write_project
    finally:
        sys.path.pop(0)
    write_project(100, tmp_path)
    _assert_same_as_plain(tmp_path)


def test_a_source_edit_moves_the_hash_between_calls(tmp_path):
    """Memoizing never hides an edit made between two calls on one loaded contract set."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from synth_contracts import write_project
    finally:
        sys.path.pop(0)
    write_project(10, tmp_path)
    cfg, cs = load_project(tmp_path)
    k = cs.kernels[0]
    s = cs.schedules[0]
    before_k, before_s = kernel_source_hash(cs, cfg, k), schedule_hashes(cs, cfg, s)
    src = cs.root / k.source
    src.write_text(src.read_text() + "\n// edited\n")
    assert kernel_source_hash(cs, cfg, k) != before_k
    assert kernel_source_hash(cs, cfg, k) == _plain_kernel_source_hash(cs, cfg, k)
    assert schedule_hashes(cs, cfg, s) == _plain_schedule_hashes(cs, cfg, s)
    if any(st.launch == k.name for st in s.steps):
        assert schedule_hashes(cs, cfg, s)[0] != before_s[0]
