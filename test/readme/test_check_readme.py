#!/usr/bin/env python3
"""Self-test of check_readme.py: a stale block fails, `...` elides, --update
repairs by key (ctest: readme-selftest)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_readme as cr  # noqa: E402

OUT = ["model: m", "layers: 4", "plan (searched): tp=4,pp=4", "stages: 1:1",
       "wrote out: 2 graphs"]


class MatchTest(unittest.TestCase):
    def test_exact(self):
        self.assertIsNone(cr.match(list(OUT), OUT))

    def test_ellipsis_elides_any_number_of_lines(self):
        self.assertIsNone(cr.match(["model: m", "...", "wrote out: 2 graphs"], OUT))
        self.assertIsNone(cr.match(["...", "plan (searched): tp=4,pp=4", "..."], OUT))
        self.assertIsNone(cr.match(["model: m", "...", "layers: 4", "..."], OUT))
        self.assertIsNone(cr.match(["...", "wrote out: 2 graphs"], OUT))

    def test_stale_line_fails(self):
        msg = cr.match(["model: m", "layers: 4", "plan (searched): tp=8,pp=2", "..."], OUT)
        self.assertIn("line 3 of the block", msg)
        self.assertIsNotNone(cr.match(["...", "plan (searched): tp=8,pp=2", "..."], OUT))

    def test_block_must_cover_the_end_without_ellipsis(self):
        self.assertIn("more lines", cr.match(["model: m", "layers: 4"], OUT))
        self.assertIsNotNone(cr.match(["...", "stages: 1:1"], OUT))

    def test_order_matters(self):
        self.assertIsNotNone(cr.match(["...", "stages: 1:1", "...", "layers: 4", "..."], OUT))

    def test_trailing_blanks_ignored(self):
        self.assertIsNone(cr.match(["model: m   ", "..."], OUT))


class UpdateTest(unittest.TestCase):
    def test_replaces_by_key_and_keeps_ellipses(self):
        block = ["model: m", "...", "plan (searched): tp=8,pp=2", "...",
                 "wrote out: 1 graph"]
        new, unplaced = cr.update(block, OUT)
        self.assertEqual(new, ["model: m", "...", "plan (searched): tp=4,pp=4",
                               "...", "wrote out: 2 graphs"])
        self.assertEqual(unplaced, [])
        self.assertIsNone(cr.match(new, OUT))

    def test_reports_lines_it_cannot_place(self):
        new, unplaced = cr.update(["model: m", "gone: x", "..."], OUT)
        self.assertEqual(unplaced, ["gone: x"])


class BlocksTest(unittest.TestCase):
    def test_finds_marked_blocks_only(self):
        lines = ["text", "```", "not checked", "```",
                 "<!-- output-of: tool a ; tool b -->", "", "```", "x", "...", "```"]
        self.assertEqual(list(cr.find_blocks(lines)), [("tool a ; tool b", 7, 9)])


if __name__ == "__main__":
    unittest.main()
