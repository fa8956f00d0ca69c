"""How long a lesson page takes to turn in the window when its run is cached, against the issue's 100 ms target.

    QT_QPA_PLATFORM=offscreen python benchmarks/bench_lessons.py [--lessons why-attention,…] [--rounds 3] [--slowest 5]

Target (issue 22): a lesson page turns in ≤ 100 ms when its run is cached. For each lesson, the first page is
opened and waited for (the run and the preparation of every page that reads it, off the UI thread: not timed, it
is "its run cached"); then every page of the same run is turned to, in order and back, `rounds` times. A turn is
timed from the call to show_page until the window has drawn it (the Step view's map, the view, the outlines; the
Experiments view's own measurement runs on its thread afterwards, as in the window). Reported: the UI thread's
time inside show_page (what blocks the window) and the time to drawn, p50 and max per lesson, and as a reference
measured in the same run, the same moves made on the window directly (the page's step, view, outlines and
experiment, without the lesson's text and question): what navigating there costs by itself on this machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

TARGET_MS = 100.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lessons", default="", help="comma-separated ids (default: every bundled lesson)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--slowest", type=int, default=5, help="list this many slowest turns (page and view)")
    args = parser.parse_args()
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    from app.lessons.lesson_panel import lesson_panel
    from app.main import drawn
    from app.startup.settings import AppSettings
    from app.window import MainWindow
    from scratchformer.lessons import bundled_lessons

    settings = AppSettings(str(Path(tempfile.mkdtemp()) / "bench.ini"))
    w = MainWindow(settings, persist=False)
    w.set_model("en-hi")
    w.resize(1400, 900)
    w.show()
    panel = lesson_panel(w)
    wanted = [x for x in args.lessons.split(",") if x]
    lessons = [x for x in bundled_lessons() if not wanted or x.id in wanted]

    def settle() -> None:
        while panel.is_busy() or w.is_busy():
            app.processEvents()
            time.sleep(0.001)
        drawn(w)

    print(f"page turns with the run cached, en-hi, target ≤ {TARGET_MS:g} ms")
    print(f"{'lesson':<22}{'turns':>6}{'UI p50':>9}{'UI max':>9}{'drawn p50':>11}{'drawn max':>11}"
          f"{'window alone p50':>18}  ")
    misses, every, alone_all = 0, [], []
    turns = []  # (ms until drawn, lesson, page, view shown)
    for lesson in lessons:
        panel.open_lesson(lesson, 1)
        settle()
        inputs = lesson.inputs(lesson.pages[0])
        same = [n for n, p in enumerate(lesson.pages, start=1) if lesson.inputs(p) == inputs]
        order = same[1:] + same[::-1]
        ui, done, alone = [], [], []
        for _ in range(args.rounds):
            for n in order:
                t0 = time.perf_counter()
                panel.show_page(n)
                ui.append((time.perf_counter() - t0) * 1000)
                settle()
                done.append((time.perf_counter() - t0) * 1000)
                turns.append((done[-1], lesson.id, n, w.tabs.currentWidget().title))
                t0 = time.perf_counter()
                panel._drive(panel._prepared[n])  # the reference: the window's moves alone, once more
                settle()
                alone.append((time.perf_counter() - t0) * 1000)
        if not ui:
            continue
        every += done
        alone_all += alone
        ok = max(done) <= TARGET_MS
        misses += not ok
        print(f"{lesson.id:<22}{len(ui):>6}{statistics.median(ui):>7.1f}ms{max(ui):>7.1f}ms"
              f"{statistics.median(done):>9.1f}ms{max(done):>9.1f}ms{statistics.median(alone):>16.1f}ms  "
              f"{'ok' if ok else 'OVER TARGET'}")
    print(f"all turns: p50 {statistics.median(every):.1f} ms, max {max(every):.1f} ms (the window's moves alone: p50 "
          f"{statistics.median(alone_all):.1f} ms, max {max(alone_all):.1f} ms); "
          + ("every lesson within target" if not misses else f"{misses} lesson(s) with a turn over target"))
    for ms, lesson_id, n, view in sorted(turns, reverse=True)[:args.slowest]:
        print(f"  slow turn: {ms:6.1f} ms  {lesson_id} page {n} ({view})")
    w.close()
    w.deleteLater()
    app.processEvents()


if __name__ == "__main__":
    main()
