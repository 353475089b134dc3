"""The layout of KataGo's inputs and policy, shared by the Go featurizer and the KataGo nets.

Neither ``pipeline/go_game/encode.py`` (numpy/numba, no torch) nor ``pipeline/nets/katago_net.py`` (torch)
imports the other; both read channel counts, indices and coordinate conventions from here.
Keep in sync with KataGo's ``cpp/neuralnet/nninputs.cpp`` (``NNInputs::fillRowV7``) and
``cpp/neuralnet/sgfmetadata.cpp`` (``SGFMetadata::fillMetadataRow``).

Version header (KataGo input versions; Kibitz implements version 7, the one every KataGo net
from model version 8 on uses, including the v15 HumanSL nets):

- v3: 22 spatial / 14 global; komi / 15; area channels under both scoring rules.
- v4: area channels 18–19 only for pass-alive areas.
- v5: 13 spatial / 12 global, no liberties or ladders (experimental, unused).
- v6: back to 22 spatial; 16 global; komi / 20; tax rules; area channels only under area
  scoring (or the second encore).
- v7: 22 spatial / 19 global: v6 plus playout-doubling advantage (15–16) and button (17);
  komi parity moved to 18. ``NUM_SPATIAL`` / ``NUM_GLOBAL`` below.
- Metadata encoder v1 (HumanSL, model version 15): a 192-wide row, ``NUM_METADATA``.

Conventions
- Board points are (x, y): x = column from the left, y = row from the TOP (SGF order).
- Policy index = y * 19 + x, pass = 361 (KataGo ``NNPos::locToPos`` with nnXLen = 19). Boards
  smaller than 19 keep the 19-wide stride, as KataGo pads them.
- SGF coordinate "pd" = (x=15, y=3); GTP "Q16" = the same point (GTP columns skip "I", rows
  count from the bottom).
- Every channel is from the side to move's view ("own" = the player about to move).
"""

from __future__ import annotations

INPUT_VERSION = 7
NN_LEN = 19  # KataGo's nnXLen = nnYLen for 19×19 nets
NUM_SPATIAL = 22
NUM_GLOBAL = 19
NUM_METADATA = 192
POLICY_SIZE = NN_LEN * NN_LEN + 1
PASS_INDEX = NN_LEN * NN_LEN

# Spatial channels of input version 7 (binaryInputNCHW[:, c]); all 0/1.
SP_ON_BOARD = 0  # 0 point is on the board
SP_OWN_STONE = 1  # 1 stone of the side to move
SP_OPP_STONE = 2  # 2 stone of the opponent
SP_LIBS_1 = 3  # 3 stone whose chain has exactly 1 liberty
SP_LIBS_2 = 4  # 4 … exactly 2 liberties
SP_LIBS_3 = 5  # 5 … exactly 3 liberties
SP_KO_BAN = 6  # 6 simple-ko point and superko-banned points (main phase)
SP_ENCORE_KO_RECAP = 7  # 7 encore ko-recapture blocks (always 0: no encore in Kibitz)
SP_ENCORE_UNUSED = 8  # 8 unused in v7 (was encore ko prohibition)
SP_PREV_MOVE_1 = 9  # 9 location of the opponent's last move (if not a pass)
SP_PREV_MOVE_2 = 10  # 10 own move before that
SP_PREV_MOVE_3 = 11  # 11 opponent's move before that
SP_PREV_MOVE_4 = 12  # 12 own move before that
SP_PREV_MOVE_5 = 13  # 13 opponent's move before that
SP_LADDERED = 14  # 14 stones of chains with 1–2 liberties that a ladder captures (current board)
SP_LADDERED_PREV_1 = 15  # 15 the same on the board one move ago
SP_LADDERED_PREV_2 = 16  # 16 the same on the board two moves ago
SP_LADDER_WORKING_MOVES = 17  # 17 moves that start a working ladder on an opponent 2-liberty chain
SP_AREA_OWN = 18  # 18 own area (area scoring, no tax: Benson pass-alive + big territories + stones)
SP_AREA_OPP = 19  # 19 opponent's area
SP_ENCORE_START_OWN = 20  # 20 own stones at the start of the second encore (always 0 here)
SP_ENCORE_START_OPP = 21  # 21 opponent's stones at the start of the second encore (always 0)

# Global channels of input version 7 (globalInputNC[:, c]).
GL_PASS_1 = 0  # 0 opponent's last move was a pass
GL_PASS_2 = 1  # 1 own move before that was a pass
GL_PASS_3 = 2  # 2 …
GL_PASS_4 = 3  # 3 …
GL_PASS_5 = 4  # 4 …
GL_SELF_KOMI = 5  # 5 komi from the mover's view / 20 (Japanese: +1 per black move "chilling")
GL_KO_NOT_SIMPLE = 6  # 6 ko rule is positional, spight or situational
GL_KO_POSITIONAL = 7  # 7 +0.5 positional/spight, −0.5 situational
GL_MULTI_STONE_SUICIDE = 8  # 8 multi-stone suicide is legal
GL_TERRITORY_SCORING = 9  # 9 territory scoring
GL_TAX_SEKI = 10  # 10 seki tax (or all-group tax)
GL_TAX_ALL = 11  # 11 all-group tax
GL_ENCORE_1 = 12  # 12 in the encore (always 0 here)
GL_ENCORE_2 = 13  # 13 in the second encore (always 0 here)
GL_PASS_ENDS_PHASE = 14  # 14 a pass now would end the phase (after a pass, or a repeated pass)
GL_PDA_ENABLED = 15  # 15 playout-doubling advantage in use (0: Kibitz queries the raw net)
GL_PDA_VALUE = 16  # 16 0.5 × playout-doubling advantage
GL_BUTTON = 17  # 17 button Go button still available
GL_KOMI_PARITY = 18  # 18 komi parity triangle wave (area scoring only)

SPATIAL_NAMES = (
    "on_board",
    "own_stone",
    "opp_stone",
    "libs_1",
    "libs_2",
    "libs_3",
    "ko_ban",
    "encore_ko_recap",
    "encore_unused",
    "prev_move_1",
    "prev_move_2",
    "prev_move_3",
    "prev_move_4",
    "prev_move_5",
    "laddered",
    "laddered_prev_1",
    "laddered_prev_2",
    "ladder_working_moves",
    "area_own",
    "area_opp",
    "encore_start_own",
    "encore_start_opp",
)
GLOBAL_NAMES = (
    "pass_1",
    "pass_2",
    "pass_3",
    "pass_4",
    "pass_5",
    "self_komi",
    "ko_not_simple",
    "ko_positional",
    "multi_stone_suicide",
    "territory_scoring",
    "tax_seki",
    "tax_all",
    "encore_1",
    "encore_2",
    "pass_ends_phase",
    "pda_enabled",
    "pda_value",
    "button",
    "komi_parity",
)

SGF_LETTERS = "abcdefghijklmnopqrs"
GTP_COLUMNS = "ABCDEFGHJKLMNOPQRST"  # GTP skips "I"


class CoordinateError(ValueError):
    """A Go coordinate that is not on the board."""


def policy_index(x: int, y: int) -> int:
    """KataGo's policy index of point (x, y): ``y * 19 + x`` (y = 0 is the top row).

    >>> policy_index(15, 3)
    72
    """
    return y * NN_LEN + x


def index_to_xy(index: int) -> tuple[int, int] | None:
    """(x, y) of a policy index, or None for the pass index 361."""
    if index == PASS_INDEX:
        return None
    if not 0 <= index < PASS_INDEX:
        raise CoordinateError(f"policy index out of range: {index!r}")
    return index % NN_LEN, index // NN_LEN


def sgf_to_xy(coord: str, board_size: int = 19) -> tuple[int, int]:
    """(x, y) of an SGF point such as ``"pd"`` (column letter, then row letter from the top).

    >>> sgf_to_xy("pd")
    (15, 3)
    """
    if len(coord) != 2:
        raise CoordinateError(f"not an SGF point: {coord!r}")
    x = ord(coord[0]) - ord("a")
    y = ord(coord[1]) - ord("a")
    if not (0 <= x < board_size and 0 <= y < board_size):
        raise CoordinateError(f"SGF point {coord!r} is off a {board_size}×{board_size} board")
    return x, y


def xy_to_sgf(x: int, y: int) -> str:
    """The SGF point of (x, y).

    >>> xy_to_sgf(15, 3)
    'pd'
    """
    return SGF_LETTERS[x] + SGF_LETTERS[y]


def xy_to_gtp(x: int, y: int, board_size: int = 19) -> str:
    """The GTP vertex of (x, y): column letter without "I", row counted from the bottom.

    >>> xy_to_gtp(15, 3)
    'Q16'
    """
    return f"{GTP_COLUMNS[x]}{board_size - y}"


def gtp_to_xy(vertex: str, board_size: int = 19) -> tuple[int, int]:
    """(x, y) of a GTP vertex such as ``"Q16"``.

    >>> gtp_to_xy("Q16")
    (15, 3)
    """
    column = vertex[:1].upper()
    if column not in GTP_COLUMNS[:board_size] or not vertex[1:].isdigit():
        raise CoordinateError(f"not a GTP vertex on a {board_size}×{board_size} board: {vertex!r}")
    row = int(vertex[1:])
    if not 1 <= row <= board_size:
        raise CoordinateError(f"GTP vertex {vertex!r} is off a {board_size}×{board_size} board")
    return GTP_COLUMNS.index(column), board_size - row


def sgf_to_gtp(coord: str, board_size: int = 19) -> str:
    """Convert an SGF point to a GTP vertex (``"pd"`` → ``"Q16"``); ``"pass"`` stays a pass."""
    if coord == "pass":
        return "pass"
    return xy_to_gtp(*sgf_to_xy(coord, board_size), board_size)


def gtp_to_sgf(vertex: str, board_size: int = 19) -> str:
    """Convert a GTP vertex to an SGF point (``"Q16"`` → ``"pd"``); ``"pass"`` stays a pass."""
    if vertex.lower() == "pass":
        return "pass"
    return xy_to_sgf(*gtp_to_xy(vertex, board_size))
