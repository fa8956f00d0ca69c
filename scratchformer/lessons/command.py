"""`scratchformer lesson list [--json]` and `scratchformer lesson check [ID|FILE …]` (DESIGN.md)."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("lesson", help="list the guided lessons, or check lesson files",
                       description="Lessons are TOML files (docs/lessons.md); the window opens them in its "
                                   "Learn group and with File › Open lesson….")  # fmt: skip
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="the bundled lessons in order")
    listing.add_argument("--json", action="store_true", help='[{"id", "title", "pages", "concepts"}]')
    check = actions.add_parser("check", help="check lessons on their models' runs (all bundled ones by default)")
    check.add_argument("lessons", nargs="*", metavar="ID|FILE", help="a bundled lesson's id or a .toml file")


def run(args: argparse.Namespace) -> int:
    from .check import Runs, check_lesson
    from .loading import bundled_lessons, find_lesson, lesson_files, load_lesson
    from .schema import LessonError

    if args.action == "list":
        lessons = bundled_lessons()
        if args.json:
            print(json.dumps([lesson.listing() for lesson in lessons], ensure_ascii=False, indent=1))
        else:
            for n, lesson in enumerate(lessons, start=1):
                print(f"{n:2}. {lesson.id:<24} {lesson.title}  ({len(lesson.pages)} pages)")
        return 0
    runs, problems, checked = Runs(), [], 0
    targets = args.lessons or [str(p) for p in lesson_files()]
    for spec in targets:
        try:
            lesson = find_lesson(spec) if args.lessons else load_lesson(spec)
            check_lesson(lesson, runs)
            checked += 1
        except LessonError as exc:
            problems.append(str(exc))
        except UserError as exc:
            problems.append(str(exc))
    if problems:
        for problem in problems:
            print(f"scratchformer: {problem}", file=sys.stderr)
        return 2
    print(f"{checked} lesson{'s' if checked != 1 else ''} checked: every page shows on its run.")
    return 0
