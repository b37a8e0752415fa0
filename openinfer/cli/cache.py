"""`openinfer cache ...`: show or prune the simulator's build cache."""

from __future__ import annotations

import argparse
import os
import time

from ..errors import OpenInferError
from ..sim import cache_root
from ..simcache import clean as clean_cache
from ..simcache import entries, megabytes

CACHE_HELP = """\
The simulator (`openinfer sim`, openinfer.Simulator) builds each program in an entry of its cache:
$OI_CACHE_DIR, else $XDG_CACHE_HOME/openinfer/sim, else ~/.cache/openinfer/sim. An entry,
NAME-KEY, holds the generated project and its build; KEY is a hash of the generated files and the
build options, so the same graph, model, sizes and target reuse it. Nothing removes entries by
itself: `openinfer cache clean` does (only entries; anything else in the folder is left alone).

examples:
  openinfer cache info                      # where it is, its entries, their sizes and last use
  openinfer cache clean --older-than 30     # remove the entries not used for 30 days
  openinfer cache clean                     # remove every entry"""


def register(sub) -> None:
    c = sub.add_parser("cache", help="show or prune the simulator's build cache",
                       description=CACHE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    c.set_defaults(help_parser=c)
    csub = c.add_subparsers(dest="cache_command", metavar="COMMAND")
    info = csub.add_parser("info", help="where the cache is, its entries, sizes and last use",
                           description="Print the cache folder, then each entry (oldest use first) with its size "
                                       "and when a simulator last used it, and the total.")
    info.set_defaults(handler=cache_info)
    clean = csub.add_parser("clean", help="remove cache entries (all, or those unused for DAYS days)",
                            description="Remove the cache's entries: all of them, or with --older-than those no "
                                        "simulator used for DAYS days. Each is removed under its lock, so a "
                                        "build in progress finishes first; the next simulator needing it builds "
                                        "it again.")
    clean.add_argument("--older-than", type=float, metavar="DAYS",
                       help="remove only entries last used more than DAYS days ago (e.g. 30, or 0.5)")
    clean.set_defaults(handler=cache_clean)


def cache_info(args) -> int:
    root = cache_root()
    found, other = entries(root)
    source = " (OI_CACHE_DIR)" if os.environ.get("OI_CACHE_DIR") else ""
    print(f"cache: {root}{source}{'' if root.is_dir() else ' (not created yet)'}")
    for e in found:
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.last_used))
        print(f"  {e.path.name:<40} {megabytes(e.nbytes):>10}  last used {used}")
    print(f"{len(found)} entries, {megabytes(sum(e.nbytes for e in found))}"
          + (f"; {len(other)} other item(s) there, not entries (never removed)" if other else ""))
    return 0


def cache_clean(args) -> int:
    if args.older_than is not None and not args.older_than >= 0:
        raise OpenInferError(f"--older-than {args.older_than}: a number of days >= 0")
    root = cache_root()
    removed = clean_cache(root, args.older_than)
    print(f"removed {len(removed)} entries ({megabytes(sum(e.nbytes for e in removed))}) from {root}")
    return 0
