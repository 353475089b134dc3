"""The games behind an aggregates folder, cut from a games table: the input of a re-extraction.

A comparison of two extractions (``bench/accuracy/meta_compare.py``) is fair only on the same games. The
committed aggregates of one side (``bench/aggregates/…``) name their games; this writes the rows
of a games table (``kibitz ingest``) whose ``game_id`` they hold, file by file under the same
paths, so that ``kibitz extract`` reads the cut table as it reads the whole one::

    kibitz ingest go ../shared/data/go/fox-selected/testing --out games-testing
    python bench/accuracy/games_of_aggregates.py go bench/aggregates/go-4x32-levels games-testing games-2890

Prints the games written and how many of the aggregates' games the table lacked (0 when the
table is the one the aggregates came from).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.extract.config import GAMES
from pipeline.jobs.extract import games_files
from pipeline.meta.aggregate import INSTANCES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("game", choices=GAMES)
    parser.add_argument("aggregates", type=Path, help="aggregates folder naming the games")
    parser.add_argument("games", type=Path, help="games table folder (kibitz ingest)")
    parser.add_argument("out", type=Path, help="games table folder to write")
    args = parser.parse_args()
    wanted = pc.unique(
        pq.read_table(args.aggregates / f"{INSTANCES}.parquet", columns=["game_id"])["game_id"]
    )
    found: set[str] = set()
    for relative in games_files(args.games, args.game):  # the files `kibitz extract` reads
        table = pq.read_table(args.games / relative)
        kept = table.filter(pc.is_in(table["game_id"], value_set=wanted))
        if kept.num_rows:
            (args.out / relative).parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(kept, args.out / relative)
            found.update(kept["game_id"].to_pylist())
    missing = len(wanted) - len(found)
    print(
        f"{len(found):,} games written to {args.out}; {missing:,} of the aggregates' games not in the table"
    )


if __name__ == "__main__":
    main()
