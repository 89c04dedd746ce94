"""PARTIAL_WITHOUT_REDUCER follows a two-level reduction: a reduce kernel that sums a per-sample partial
into a ``scratch`` workspace (per batch chunk) counts as its reducer when a later reduce launch of the same
schedule reads that workspace and writes the parameter's gradient (the fused path's
aux_weight_grad_partial -> aux_weight_grad_finish). A workspace that no later reduce turns into the
gradient leaves the partial unreduced."""

from __future__ import annotations

from pathlib import Path

from audit.api import check
from audit.config import load_config
from audit.load import load_contracts

REPO = Path(__file__).resolve().parents[1]
TRUNK_FINISH = '''[[schedule.step]]
launch = "aux_weight_grad_finish"
bind = { ws = "wg_ws_trunk", wsb = "wg_wsb_trunk", dW = "aux_trunk_dW", db = "aux_trunk_db" }
'''


def _findings(edit) -> list[str]:  # type: ignore[no-untyped-def]
    texts = {p.relative_to(REPO).as_posix(): p.read_text() for p in (REPO / "contracts").rglob("*.toml")}
    edit(texts)
    cs = load_contracts(REPO / "contracts", REPO, texts=texts)
    return [f.message for f in check(REPO, select=["PARTIAL_WITHOUT_REDUCER"], config=load_config(REPO), contracts=cs).findings]


def test_the_shipped_two_level_reductions_reduce_every_partial() -> None:
    assert _findings(lambda texts: None) == []


def test_a_workspace_nobody_finishes_leaves_the_partial_unreduced() -> None:
    def drop_finish(texts: dict[str, str]) -> None:
        assert TRUNK_FINISH in texts["contracts/schedules.toml"]
        texts["contracts/schedules.toml"] = texts["contracts/schedules.toml"].replace(TRUNK_FINISH, "", 1)

    assert _findings(drop_finish) == [
        'Kernel "aux_trunk_backward" partial "db_partial" of "aux_trunk_b" is reduced in schedule "aux_heads_backward_fused", '
        'but no reducer writes a buffer declared as the gradient of "aux_trunk_b".'
    ]


def test_only_a_scratch_workspace_is_followed() -> None:
    """Declared as a plain activation, the workspace is an end product: the partial's reducer writes no gradient."""

    def not_scratch(texts: dict[str, str]) -> None:
        b = texts["contracts/buffers.toml"]
        old = 'name = "wg_wsb_trunk"\ndtype = "f32"\nshape = ["WGP", "SH2"]\nkind = "scratch"'
        assert old in b
        texts["contracts/buffers.toml"] = b.replace(old, old.replace('kind = "scratch"', 'kind = "activation"'), 1)
        old = 'name = "wg_ws_trunk"\ndtype = "f32"\nshape = ["WGP", "SH2", "E"]\nkind = "scratch"'
        assert old in texts["contracts/buffers.toml"]
        texts["contracts/buffers.toml"] = texts["contracts/buffers.toml"].replace(old, old.replace('kind = "scratch"', 'kind = "activation"'), 1)

    assert _findings(not_scratch) == [
        'Kernel "aux_trunk_backward" partial "db_partial" of "aux_trunk_b" is reduced in schedule "aux_heads_backward_fused", '
        'but no reducer writes a buffer declared as the gradient of "aux_trunk_b".'
    ]
