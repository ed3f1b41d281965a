"""Screenshot of a demo report (report.html) in headless Chromium, with an overflow check.

    python experiments/screenshot_report.py runs/demo/report.html --out docs/demo_report.png

The page is first loaded with a small script that writes its layout into the title
(read back with --dump-dom): the page's scroll width against the window's, and every
table, image, code span or paragraph whose right edge passes the body's. Any of them, or
a scroll width above the window's, is horizontal overflow: the script says so and exits
with status 1 (the screenshot is still taken, to look at). The screenshot is the whole
page at --width pixels, saved downscaled to --save-width (palette PNG, well under 1 MB).
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROBE = """<script>
window.addEventListener('load', () => {
  const body = document.body.getBoundingClientRect();
  const wide = [...document.querySelectorAll('table, img, code, p, h1, h2')]
    .filter(e => e.getBoundingClientRect().right > body.right + 1)
    .map(e => e.tagName + ': ' + e.textContent.slice(0, 60));
  document.title = 'LAYOUT' + JSON.stringify({
    scroll_width: document.documentElement.scrollWidth, window_width: window.innerWidth,
    height: document.documentElement.scrollHeight, wide: wide});
});
</script>"""
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--run-all-compositor-stages-before-draw",
         "--virtual-time-budget=10000"]


def chromium(binary: str, args: list[str], profile: Path) -> str:
    cmd = [binary, *FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=180).stdout


def measure(binary: str, report: Path, width: int, tmp: Path) -> dict:
    """The layout figures of ``report`` at ``width`` px (a copy with the probe script)."""
    page = report.read_text()
    base = f"<base href='{html.escape(report.parent.resolve().as_uri())}/'>"
    probe = tmp / "probe.html"
    page = page.replace("<head>", "<head>" + base, 1) if "<head>" in page else base + page
    page = page.replace("</body>", PROBE + "</body>", 1) if "</body>" in page else page + PROBE
    probe.write_text(page)
    dom = chromium(binary, ["--dump-dom", f"--window-size={width},1000", probe.as_uri()],
                   tmp / "profile-probe")
    found = re.search(r"<title>LAYOUT(.*?)</title>", dom, re.S)
    if not found:
        raise SystemExit("the probe script did not run (no LAYOUT title in the DOM)")
    return json.loads(html.unescape(found.group(1)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", type=Path, help="report.html to render")
    ap.add_argument("--out", type=Path, default=Path("docs/demo_report.png"))
    ap.add_argument("--width", type=int, default=1400, help="window width in px")
    ap.add_argument("--save-width", type=int, default=900, help="width of the saved PNG")
    ap.add_argument("--max-height", type=int, default=16000, help="longest page captured")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    args = ap.parse_args()
    from PIL import Image  # matplotlib's dependency

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        layout = measure(args.chromium, args.report, args.width, tmp)
        height = min(layout["height"] + 20, args.max_height)
        shot = tmp / "shot.png"
        chromium(args.chromium, [f"--screenshot={shot}", f"--window-size={args.width},{height}",
                                 args.report.resolve().as_uri()], tmp / "profile-shot")
        image = Image.open(shot).convert("RGB")
        scale = args.save_width / image.width
        image = image.resize((args.save_width, round(image.height * scale)), Image.LANCZOS)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(args.out,
                                                                        optimize=True)
    size = args.out.stat().st_size
    overflow = layout["scroll_width"] > layout["window_width"] or bool(layout["wide"])
    print(json.dumps({**layout, "overflow": overflow, "png": str(args.out),
                      "png_size": list(image.size), "png_bytes": size}, indent=1))
    return 1 if overflow else 0


if __name__ == "__main__":
    sys.exit(main())
