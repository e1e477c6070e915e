#!/usr/bin/python3
"""Renders report.html in a real browser (headless Chromium) and checks it.

Runs plan-parallel -o on GPT-2-tiny (tp 2 x pp 2 x dp 2, 16 micro-batches,
on one Atlas 800T A2), then
  * chromium --dump-dom: the stages, the numbers of report.txt and the
    charts (svg elements with their boxes) are in the rendered DOM;
  * chromium --screenshot: the page is not blank: many distinct colours,
    enough non-white pixels, and the chart palette's colours present (the
    PNG is decoded here with zlib and numpy, no imaging library).
Chromium runs offline (--disable-background-networking and friends), with
a fresh profile. Without chromium the test fails and says how to get it
(.ci/setup installs Debian's chromium).
"""
import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# Colours of report.html's charts (lib/Report/HtmlReport.cpp).
PALETTE = {
    "forward": (0x4E, 0x79, 0xA7),
    "backward": (0x59, 0xA1, 0x4F),
    "optimizer/memory": (0x9C, 0x75, 0x5F),
    "tp/activations": (0xF2, 0x8E, 0x2B),
    "dp": (0xE1, 0x57, 0x59),
}


def fail(msg):
    print("check_report_html: FAIL: " + msg)
    sys.exit(1)


def chromium_binary():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    fail("chromium not found on PATH; install Debian's 'chromium' package "
         "(bash .ci/setup does) to render report.html")


def run_chromium(binary, args, url, timeout=180):
    profile = tempfile.mkdtemp(prefix="loom-chromium-")
    try:
        cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-quic", "--no-first-run",
               "--disable-background-networking",
               "--disable-component-update", "--disable-sync",
               "--user-data-dir=" + profile] + args + [url]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout)
        if p.returncode != 0:
            fail("chromium exited with %d: %s" %
                 (p.returncode, p.stderr.decode(errors="replace")[-2000:]))
        return p.stdout.decode(errors="replace")
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def read_png(path):
    """Returns an (height, width, channels) uint8 array of an 8-bit RGB or
    RGBA, non-interlaced PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(path + " is not a PNG")
    pos, idat, ihdr = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    width, height, depth, ctype, _, _, interlace = ihdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        fail("unexpected PNG format: depth %d, colour type %d, interlace %d"
             % (depth, ctype, interlace))
    bpp = 3 if ctype == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8)
    stride = width * bpp
    rows = raw.reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(height):
        f, line = rows[y, 0], rows[y, 1:].astype(np.int32)
        if f == 0:
            cur = line
        elif f == 1:  # Sub: a running sum per channel.
            cur = np.cumsum(line.reshape(-1, bpp), axis=0).reshape(-1) % 256
        elif f == 2:  # Up
            cur = (line + prev) % 256
        else:  # Average, Paeth: left-to-right, on plain lists (fast).
            ln, pr, cu = line.tolist(), prev.tolist(), [0] * stride
            for x in range(stride):
                a = cu[x - bpp] if x >= bpp else 0
                b = pr[x]
                if f == 3:
                    cu[x] = (ln[x] + (a + b) // 2) & 255
                else:
                    c = pr[x - bpp] if x >= bpp else 0
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc
                                                            else c)
                    cu[x] = (ln[x] + pred) & 255
            cur = np.array(cu, dtype=np.int32)
        out[y] = cur
        prev = cur
    return out.reshape(height, width, bpp)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plan-parallel", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    binary = chromium_binary()
    os.makedirs(args.work, exist_ok=True)
    out = os.path.join(args.work, "out")
    p = subprocess.run(
        [args.plan_parallel, os.path.join(ROOT, "examples/models/gpt2-tiny.onnx"),
         "--hw", os.path.join(ROOT, "examples/hw/atlas800t-a2.yaml"),
         "--batch", "32", "--seq", "64", "--plan", "tp=2,pp=2,mb=1,vpp=1",
         "-o", out, "--force", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        fail("plan-parallel failed: " + p.stderr.decode(errors="replace"))
    html = os.path.join(out, "report.html")
    report = open(os.path.join(out, "report.txt")).read()
    url = "file://" + os.path.abspath(html)

    # The rendered DOM.
    dom = run_chromium(binary, ["--dump-dom"], url)
    m = re.search(r"predicted: step ([0-9.]+ [mun]?s), ([0-9]+) tokens/s, "
                  r"MFU ([0-9.]+)", report)
    if not m:
        fail("no 'predicted:' line in report.txt")
    step, tokens, mfu = m.groups()
    stage_mem = re.findall(r"^stage \d+: .* memory (\S+ \S+ / \S+ \S+)$",
                           report, re.M)
    checks = [
        ("the predicted step " + step, '<div class="v">%s</div>' % step),
        ("tokens/s " + tokens, '<div class="v">%s</div>' % tokens),
        ("MFU " + mfu, '<div class="v">%s</div>' % mfu),
        ("lane of stage 0", ">stage 0</text>"),
        ("lane of stage 1", ">stage 1</text>"),
        ("the first micro-batches' timeline", 'id="timeline-head"'),
        ("the last micro-batches' timeline", 'id="timeline-tail"'),
        ("the memory chart", 'id="memory-chart"'),
        ("the breakdown chart", 'id="breakdown-chart"'),
        ("the top-plans table", 'id="top-table"'),
        ("the placement table", 'id="placement-table"'),
    ] + [("stage %d's memory %s" % (i, v),
          '<td class="stage-memory">%s</td>' % v)
         for i, v in enumerate(stage_mem)]
    if len(stage_mem) != 2:
        fail("expected 2 stages in report.txt, found %d" % len(stage_mem))
    for what, needle in checks:
        if needle not in dom:
            fail("the rendered DOM lacks %s (%r)" % (what, needle))
    svgs = dom.count("<svg")
    rects = dom.count("<rect")
    if svgs < 4 or rects < 60:
        fail("the rendered DOM has %d svg and %d rect elements; expected at "
             "least 4 and 60" % (svgs, rects))

    # The screenshot.
    shot = os.path.join(args.work, "report.png")
    if os.path.exists(shot):
        os.remove(shot)
    run_chromium(binary, ["--screenshot=" + shot, "--window-size=1280,2000",
                          "--hide-scrollbars"], url)
    if not os.path.exists(shot):
        fail("chromium wrote no screenshot")
    img = read_png(shot)[:, :, :3]
    h, w, _ = img.shape
    if (w, h) != (1280, 2000):
        fail("screenshot is %dx%d, expected 1280x2000" % (w, h))
    flat = img.reshape(-1, 3)
    colours = np.unique(flat[:, 0].astype(np.int64) << 16 |
                        flat[:, 1].astype(np.int64) << 8 | flat[:, 2])
    nonwhite = float(np.mean(np.any(flat < 245, axis=1)))
    if len(colours) < 50:
        fail("screenshot has only %d distinct colours (blank?)" % len(colours))
    if nonwhite < 0.03:
        fail("screenshot is %.1f%% non-white (blank?)" % (100 * nonwhite))
    for name, rgb in sorted(PALETTE.items()):
        hits = int(np.sum(np.all(flat == np.array(rgb, dtype=np.uint8),
                                 axis=1)))
        if hits < 50:
            fail("screenshot has %d pixels of the %s colour #%02x%02x%02x; "
                 "the charts did not render" % ((hits, name) + rgb))
    print("check_report_html: ok: %d svg, %d rect elements in the DOM; "
          "screenshot %dx%d, %d colours, %.1f%% non-white (%s)"
          % (svgs, rects, w, h, len(colours), 100 * nonwhite, shot))


if __name__ == "__main__":
    main()
