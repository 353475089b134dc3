"""Real Stockfish (Debian package) as the chess value evaluator: hand-checkable positions."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from pipeline.nets.stockfish import (
    V_MAX,
    StockfishEvaluator,
    StockfishSettings,
    find_stockfish,
    win_rate_to_v,
)

MATE_IN_ONE = "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1"  # Ra8#
AFTER_MATE = "R5k1/5ppp/8/8/8/8/5PPP/6K1 b - - 1 1"
STALEMATE = "7k/5Q2/6K1/8/8/8/8/8 b - - 0 1"
UP_A_QUEEN = "rnb1kbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 3"  # White to move
START = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"


@pytest.fixture(scope="module")
def engine():
    # 2,000 nodes: at 1,000 Stockfish 15.1 stops inside an iteration on the start
    # position and reports -110 cp (seen while choosing the default)
    with StockfishEvaluator(StockfishSettings(nodes=2000)) as e:
        yield e


def test_binary_is_found():
    assert os.access(find_stockfish(), os.X_OK)


def test_mate_and_stalemate_are_exact(engine):
    w = engine.evaluate([AFTER_MATE, STALEMATE])
    assert w.tolist() == [0.0, 0.5]
    v = engine.evaluate_v([AFTER_MATE])
    # the mover who played Ra8# sees v_after = -v(position after) = the clip maximum
    assert -v[0] == pytest.approx(V_MAX, abs=1e-5)
    assert pytest.approx(np.log((1 - 1e-4) / 1e-4)) == V_MAX


def test_searched_values_are_sensible(engine):
    w = engine.evaluate([MATE_IN_ONE, UP_A_QUEEN, START])
    assert w[0] == 1.0  # mate found: W = 1000
    assert w[1] > 0.95  # a queen up
    assert 0.4 < w[2] < 0.65  # start position: about even, White slightly better


def test_same_fens_give_identical_values():
    fens = [START, UP_A_QUEEN, "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"]
    with (
        StockfishEvaluator(StockfishSettings(nodes=500)) as a,
        StockfishEvaluator(StockfishSettings(nodes=500)) as b,
    ):
        first = a.evaluate(fens)
        a._cache.clear()  # search again, in another order, on a used engine
        again = a.evaluate(fens[::-1])[::-1]
        other = b.evaluate(fens)
    assert first.tolist() == again.tolist() == other.tolist()


def test_v_is_clipped_logit():
    v = win_rate_to_v(np.array([0.0, 0.5, 1.0, 0.75]))
    assert v.tolist() == pytest.approx([-V_MAX, 0.0, V_MAX, np.log(3)], abs=1e-5)


def test_a_killed_engine_is_restarted():
    with StockfishEvaluator(StockfishSettings(nodes=300)) as e:
        before = e.evaluate([UP_A_QUEEN])
        os.kill(e.pid, signal.SIGKILL)
        time.sleep(0.2)
        e._cache.clear()
        after = e.evaluate([UP_A_QUEEN])
        assert e.restarts == 1
    assert after.tolist() == before.tolist()
