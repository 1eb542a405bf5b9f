"""einsum against torch: equations (implicit output, '...', repeated
subscripts, broadcasting size-1 dims, three operands), gradients, errors."""
import pytest

import helpers
import jitgrad
from helpers import same_as_torch

EQUATIONS = [
    ("ij,jk->ik", [(3, 4), (4, 2)]), ("ij,jk", [(3, 4), (4, 2)]), ("i,j->ij", [(3,), (2,)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij->ji", [(2, 3)]), ("ji", [(2, 3)]),
    ("ij->", [(2, 3)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("iij->ji", [(2, 2, 3)]),
    ("i,i", [(4,), (4,)]), ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("...i,...i->...", [(2, 3), (3,)]), ("b...,b...->b", [(2, 3, 4), (2, 3, 4)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]), ("ij,j,i->", [(2, 3), (3,), (2,)]),
    ("i,i->i", [(1,), (3,)]), ("ij,kj->ikj", [(2, 1), (3, 4)]), ("i j , j k -> i k", [(2, 3), (3, 2)]),
]


@pytest.mark.parametrize("equation, shapes", EQUATIONS, ids=[e for e, _ in EQUATIONS])
def test_values_and_gradients_match_torch(equation, shapes):
    helpers.check_torch(lambda *ts: jitgrad.einsum(equation, *ts),
                        lambda *ts: helpers.require_torch().einsum(equation, *ts), shapes,
                        dtype="float64")


def test_operands_as_a_list():
    same_as_torch(lambda L: L.einsum("ij,jk->ik", [L.ones(2, 3), L.ones(3, 2)]))


@pytest.mark.parametrize("equation, shapes", [
    ("ij,jk", [(2, 3), (4, 3)]), ("ij,j", [(2, 3)]),
    ("ijk", [(2, 3)]), ("ij->ii", [(2, 3)]), ("ij->k", [(2, 3)]), ("i1", [(2, 3)]),
    ("ii", [(2, 3)]), ("i,i", [(3,), (4,)]),
])
def test_errors_match_torch(equation, shapes):
    same_as_torch(lambda L: L.einsum(equation, *[L.ones(*s) for s in shapes]))


def test_more_operands_than_the_equation_names():
    # torch raises ValueError or RuntimeError here depending on the operand count
    with pytest.raises(RuntimeError, match="more operands were provided than specified"):
        jitgrad.einsum("i,j", *[jitgrad.ones(2)] * 3)
