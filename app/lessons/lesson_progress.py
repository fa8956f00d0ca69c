"""What the window remembers of each lesson between launches: the page the learner was on, each question's
answer and whether it was right (QSettings through AppSettings, one JSON text per lesson)."""

from __future__ import annotations

import json

PREFIX = "lessons/"
LAST = "lessons_last"  # the lesson opened last: its id, or its file for one opened with File › Open lesson…


class LessonProgress:
    """`persist=False` (a --screenshot window): progress lives in memory only (beside the settings object, for
    that window's life), and the user's settings stay as they were."""

    def __init__(self, settings, persist: bool = True) -> None:
        self.settings, self.persist = settings, persist
        if not hasattr(settings, "lesson_memory"):
            settings.lesson_memory = {}  # key → JSON
        self._memory: dict[str, str] = settings.lesson_memory

    def _get(self, key: str) -> str:
        return self._memory[key] if not self.persist and key in self._memory else self.settings.get(key)

    def _read(self, lesson_id: str) -> dict:
        raw = self._get(PREFIX + lesson_id)
        try:
            data = json.loads(raw) if raw else {}
        except (TypeError, ValueError):
            data = {}
        return data if isinstance(data, dict) else {}

    def _write(self, lesson_id: str, data: dict) -> None:
        text = json.dumps(data, ensure_ascii=False)
        if not self.persist:
            self._memory[PREFIX + lesson_id] = text
            return
        self.settings.set(PREFIX + lesson_id, text)
        self.settings.sync()

    def page(self, lesson_id: str) -> int:
        """The page (1-based) to come back to; 1 for a lesson never opened."""
        page = self._read(lesson_id).get("page", 1)
        return page if isinstance(page, int) and page >= 1 else 1

    def set_page(self, lesson_id: str, page: int) -> None:
        data = self._read(lesson_id)
        data["page"] = page
        data["seen"] = max(int(data.get("seen", 0) or 0), page)
        self._write(lesson_id, data)

    def seen(self, lesson_id: str) -> int:
        """The furthest page reached."""
        seen = self._read(lesson_id).get("seen", 0)
        return seen if isinstance(seen, int) else 0

    def answer(self, lesson_id: str, page: int) -> tuple[object, bool] | None:
        """(response, correct) of the page's question, or None when not answered."""
        item = self._read(lesson_id).get("answers", {}).get(str(page))
        if not isinstance(item, dict) or "response" not in item:
            return None
        response = item["response"]
        return (tuple(response) if isinstance(response, list) else response), bool(item.get("correct"))

    def record(self, lesson_id: str, page: int, response, correct: bool) -> None:
        data = self._read(lesson_id)
        answers = data.setdefault("answers", {})
        answers[str(page)] = {"response": list(response) if isinstance(response, tuple) else response,
                              "correct": bool(correct)}  # fmt: skip
        self._write(lesson_id, data)

    def answers(self, lesson_id: str) -> dict[int, bool]:
        """Page → whether its question was answered right."""
        out = {}
        for k, v in self._read(lesson_id).get("answers", {}).items():
            if str(k).isdigit() and isinstance(v, dict):
                out[int(k)] = bool(v.get("correct"))
        return out

    def restart(self, lesson_id: str) -> None:
        self._write(lesson_id, {})

    def last(self) -> str:
        return self._get(LAST)

    def set_last(self, spec: str) -> None:
        if self.persist:
            self.settings.set(LAST, spec)
        else:
            self._memory[LAST] = spec
