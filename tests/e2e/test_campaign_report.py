"""servetune report: the reports of a campaign archive from its summary.json (the seed fixtures
in tests/data/campaign). report.md holds the seeds' tables; report.html renders in headless
Chromium: the dumped DOM holds the svg.chart elements and their marks, and the screenshot (a PNG
decoded here with zlib + struct) holds the bar palette's colours in bulk. Also: --compare-with a
drifted archive exits 1 and writes compare.json, an unchanged one exits 0; a bad DIR, a summary
that is not one and bad usage exit 2 naming the file or field; an unwritable report exits 3.
Python 3 standard library only; each Chromium call is bounded to 60 s; skips (77) only when
Chromium is not installed."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from stlib import SERVETUNE, Checker  # noqa: E402

DATA = os.environ.get("ST_TEST_DATA", os.path.join(os.path.dirname(__file__), "..", "data"))
FIX = os.path.join(DATA, "campaign")
TMP = tempfile.mkdtemp(prefix="st-report-")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    print("chromium is not installed: skipping")
    sys.exit(77)

# svg.c's palette: the baseline's grey, then the arms in the summary's order.
BASELINE = (0x5F, 0x63, 0x68)
ARMS = [(0x1F, 0x6F, 0xD1), (0xE8, 0x71, 0x0A), (0x1E, 0x8E, 0x3E)]

c = Checker("campaign_report")


def report(*args):
    return subprocess.run([SERVETUNE, "report"] + list(args), capture_output=True, text=True,
                          timeout=60)


def archive(name, fixture, edit=None):
    """A campaign directory holding the fixture as summary.json (edited by edit(obj))."""
    d = os.path.join(TMP, name)
    os.makedirs(d)
    with open(os.path.join(FIX, fixture)) as f:
        obj = json.load(f)
    if edit is not None:
        edit(obj)
    with open(os.path.join(d, "summary.json"), "w") as f:
        json.dump(obj, f)
    return d


def chromium(*args):
    prof = tempfile.mkdtemp(prefix="st-chromium-", dir=TMP)
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--force-color-profile=srgb", "--user-data-dir=" + prof, "--no-first-run"] + list(args)
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return None


def png_pixels(path):
    """(width, height, rows of bytes, bytes per pixel) of an 8-bit RGB/RGBA PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, w = 8, b"", None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or ctype not in (2, 6) or interlace != 0:
                raise ValueError("unsupported PNG: depth %d type %d interlace %d"
                                 % (depth, ctype, interlace))
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        ft = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            cc = prev[i - bpp] if i >= bpp else 0
            if ft == 1:
                line[i] = (line[i] + a) & 255
            elif ft == 2:
                line[i] = (line[i] + b) & 255
            elif ft == 3:
                line[i] = (line[i] + ((a + b) >> 1)) & 255
            elif ft == 4:
                p = a + b - cc
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - cc)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else cc)
                line[i] = (line[i] + pred) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, rows, bpp


def colour_counts(path, colours):
    w, h, rows, bpp = png_pixels(path)
    counts = [0] * len(colours)
    for row in rows:
        for x in range(0, w * bpp, bpp):
            r, g, b = row[x], row[x + 1], row[x + 2]
            for k, (cr, cg, cb) in enumerate(colours):
                if abs(r - cr) <= 3 and abs(g - cg) <= 3 and abs(b - cb) <= 3:
                    counts[k] += 1
    return counts


# ---- seed 000: write both reports ----
d0 = archive("seed000", "summary-seed000.json")
p = report(d0, "--html")
c.check(p.returncode == 0, "report --html: exit 0 (%d): %s" % (p.returncode, p.stderr))
md_path, html_path = os.path.join(d0, "report.md"), os.path.join(d0, "report.html")
c.check(os.path.exists(md_path) and os.path.exists(html_path), "report.md and report.html")
c.check(md_path in p.stdout and html_path in p.stdout, "says what it wrote: %r" % p.stdout)
md = open(md_path).read() if os.path.exists(md_path) else ""
html = open(html_path).read() if os.path.exists(html_path) else ""
for want in ("| baseline | 123.72 [123.41–124.05] (3) | 128.75 [128.30–129.02] (3) | "
             "122.11 [121.80–122.64] (3) |",
             "| batch1024 | 17.993 (1) | 0.854 (1) | 15.955 (1) |",
             "| mtp1 | 159669 | +8.90% | 131072 |",
             "**baseline**: the baseline stays."):
    c.check(want in md, "report.md has %r" % want)
for bad in ("http://", "https://", "src=", "href=", "<script", "url("):
    c.check(bad not in html, "report.html has no %r" % bad)
c.check(oct(os.stat(html_path).st_mode & 0o777) == "0o644", "report.html is 0644")
p2 = report(d0 + "/")
c.check(p2.returncode == 0 and open(md_path).read() == md, "a second run writes the same bytes")
c.check(md_path in p2.stdout, "DIR/ is DIR: %r" % p2.stdout)

# ---- headless Chromium: the DOM and the pixels ----
url = "file://" + os.path.abspath(html_path)
dom = chromium("--dump-dom", url)
if dom is None:
    c.check(False, "chromium --dump-dom finished within 60 s")
else:
    text = dom.stdout
    c.check(dom.returncode == 0 and "</html>" in text, "chromium --dump-dom: exit 0 (%d), %d "
            "bytes; stderr tail %r" % (dom.returncode, len(text), dom.stderr[-300:]))
    c.check(text.count('<svg class="chart"') == 13, "13 svg.chart elements in the DOM (%d)"
            % text.count('<svg class="chart"'))
    for kind, n in (("bars", 9), ("kv", 1), ("ttft", 3)):
        got = text.count('data-chart="%s"' % kind)
        c.check(got == n, "%d charts of kind %s (%d)" % (n, kind, got))
    c.check(text.count('<rect class="bar') == 56, "56 bars (%d)" % text.count('<rect class="bar'))
    c.check(text.count('<path class="whisker"') == 28, "28 whiskers")
    c.check(text.count('<rect class="box"') == 4, "4 TTFT boxes")

png = os.path.join(TMP, "seed000.png")
shot = chromium("--screenshot=" + png, "--window-size=1200,3000", url)
if shot is None:
    c.check(False, "chromium --screenshot finished within 60 s")
elif not os.path.exists(png):
    c.check(False, "chromium wrote the screenshot (exit %d): %r" % (shot.returncode,
                                                                   shot.stderr[-300:]))
else:
    counts = colour_counts(png, [BASELINE] + ARMS)
    print("palette pixels (baseline, mtp1, mtp3, batch1024):", counts)
    # The KV chart alone draws each arm's bar about 130 px wide and 150-210 px high.
    for name, n in zip(("baseline", "mtp1", "mtp3", "batch1024"), counts):
        c.check(n >= 5000, "the screenshot shows %s's bar colour in bulk (%d pixels)" % (name, n))
    white = colour_counts(png, [(255, 255, 255)])[0]
    w, h, _, _ = png_pixels(png)
    c.check(white < w * h * 0.97, "the page is not blank (%d of %d pixels white)" % (white, w * h))

# ---- seed 003: lines over concurrency, failures ----
d3 = archive("seed003", "summary-seed003.json")
p = report(d3, "--html")
c.check(p.returncode == 0, "seed 003: exit 0 (%d): %s" % (p.returncode, p.stderr))
dom = chromium("--dump-dom", "file://" + os.path.join(d3, "report.html"))
if dom is None:
    c.check(False, "chromium --dump-dom (seed 003) finished within 60 s")
else:
    text = dom.stdout
    c.check(text.count('data-chart="lines"') == 6, "6 line charts (%d)"
            % text.count('data-chart="lines"'))
    c.check(text.count('<polyline class="line"') == 20, "20 polylines (%d)"
            % text.count('<polyline class="line"'))
    c.check("arms/dp4_attention/screening/server.log" in text, "the failure's evidence path")
md3 = open(os.path.join(d3, "report.md")).read()
c.check("| tp4pp2_090 | 28.80 (1) | 47.50 (1) | 63.90 (1) | 76.20 (1) | 106.40 (1) | "
        "125.70 (1) |" in md3, "seed 003: hit90 by concurrency")

# ---- --compare-with ----
same = archive("seed000-again", "summary-seed000.json")
p = report(d0, "--compare-with", same)
cmp_path = os.path.join(d0, "compare.json")
c.check(p.returncode == 0, "compare with an unchanged archive: exit 0 (%d): %s"
        % (p.returncode, p.stderr))
c.check("No drift" in p.stdout, "says there is no drift: %r" % p.stdout[-300:])


def faster_then(obj):
    """The earlier campaign's baseline decoded Chinese at 140.00 tokens/s: 128.75 / 140 - 1 =
    -8.04%, beyond the 5% threshold."""
    for m in obj["metrics"]:
        if m["arm"] == "baseline" and m["metric"] == "decode2048.decode_tps@chinese":
            m.update(values=[139.5, 140.0, 140.4], agg=140.0, min=139.5, max=140.4)


then = archive("seed000-then", "summary-seed000.json", faster_then)
p = report(d0, "--compare-with", then)
c.check(p.returncode == 1, "compare with a drifted archive: exit 1 (%d): %s"
        % (p.returncode, p.stderr))
c.check("| decode2048.decode_tps@chinese | screening | 128.75 | 140.00 | -8.04% | **yes** |"
        in p.stdout, "prints the drift row: %r" % p.stdout[-600:])
try:
    cj = json.load(open(cmp_path))
    c.check(cj["drifted"] is True and cj["with"] == then, "compare.json: drifted, with DIR2")
    rows = [x for x in cj["drift"] if x["beyond"]]
    c.check(len(rows) == 1 and rows[0]["metric"] == "decode2048.decode_tps@chinese",
            "one metric beyond: %r" % rows)
except (OSError, ValueError, KeyError) as e:
    c.check(False, "compare.json readable: %s" % e)

# ---- bad input, bad usage, unwritable ----
missing = os.path.join(TMP, "nope")
p = report(missing)
c.check(p.returncode == 2 and os.path.join(missing, "summary.json") in p.stderr,
        "missing archive: exit 2 naming summary.json (%d): %r" % (p.returncode, p.stderr))
p = report(d0, "--compare-with", missing)
c.check(p.returncode == 2 and os.path.join(missing, "summary.json") in p.stderr,
        "missing DIR2: exit 2 naming it (%d): %r" % (p.returncode, p.stderr))
bad = os.path.join(TMP, "bad")
os.makedirs(bad)
shutil.copy(os.path.join(FIX, "summary-broken-verdict.json"), os.path.join(bad, "summary.json"))
p = report(bad)
c.check(p.returncode == 2 and "summary.json" in p.stderr and "arms[0].verdict" in p.stderr,
        "broken summary: exit 2 naming the file and field (%d): %r" % (p.returncode, p.stderr))
c.check(report().returncode == 2, "no DIR: exit 2")
c.check(report(d0, d3).returncode == 2, "two DIRs: exit 2")
c.check(report(d0, "--bogus").returncode == 2, "unknown option: exit 2")
p = report("--help")
c.check(p.returncode == 0 and "--compare-with" in p.stdout, "--help: exit 0 with usage")
ro = archive("readonly", "summary-minimal.json")
os.makedirs(os.path.join(ro, "report.md"))  # a directory where the file must go
p = report(ro)
c.check(p.returncode == 3 and "report.md" in p.stderr, "cannot write report.md: exit 3 (%d): %r"
        % (p.returncode, p.stderr))

shutil.rmtree(TMP, ignore_errors=True)
c.close()
