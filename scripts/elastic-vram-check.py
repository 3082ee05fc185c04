#!/usr/bin/env python3
"""Elastic VRAM on a live server (docs/perf-notes.md, "Elastic VRAM").

A client asks one greedy question in a loop while, after 3 s, a second process
(`freetoken device --hold`) takes all the GPU's free memory plus EXTRA GiB and holds it 10 s. The
expert cache must give way within about a second, no request may fail, the text must not change
(with a policy that computes every expert on the GPU), and the cache must grow back afterwards.

  freetoken serve --model DIR --model-name q30 --device cuda --gpu-mem 16 --moe-policy fetch --port 19190 &
  python3 scripts/elastic-vram-check.py 19190 OUT_DIR 9.6

Writes OUT_DIR/{stats_before,stats_after,elastic}.json (the /v1/stats samples, the holder's log,
every request) and prints the summary. Needs nvidia-smi and freetoken on PATH.
"""
import json
import re
import subprocess
import sys
import threading
import time
import urllib.request
port, out, hold_extra = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
base = f"http://127.0.0.1:{port}"
def get(path):
    with urllib.request.urlopen(base + path, timeout=10) as r: return json.loads(r.read())
def ask(i):
    body = {"model": "q30", "max_tokens": 48, "temperature": 0,
            "messages": [{"role": "user", "content": "Write a short poem about GPUs and memory."}]}
    req = urllib.request.Request(base + "/v1/messages", json.dumps(body).encode(), {"content-type": "application/json"})
    t = time.time()
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            j = json.loads(r.read()); return r.status, "".join(c.get("text", "") for c in j["content"]), time.time() - t
    except urllib.error.HTTPError as e: return e.code, e.read().decode()[:300], time.time() - t
    except Exception as e: return -1, repr(e), time.time() - t
for _ in range(600):
    try: get("/v1/stats"); break
    except Exception: time.sleep(0.5)
t0 = time.time()
samples, stop = [], threading.Event()
def sample():
    while not stop.is_set():
        try:
            x = get("/v1/stats")["engine"]["placement"]
            e = x["experts"]; samples.append((round(time.time() - t0, 3), e["slots"], x["total_bytes"], e.get("elastic", {})))
        except Exception as ex: samples.append((round(time.time() - t0, 3), -1, 0, {"err": repr(ex)}))
        time.sleep(0.1)
th = threading.Thread(target=sample); th.start()
json.dump(get("/v1/stats"), open(f"{out}/stats_before.json", "w"), indent=1)
st, ref, dt = ask(0); print(f"baseline: {st} {dt:.1f}s {ref[:80]!r}", flush=True)
results, done = [], threading.Event()
def loop():
    i = 1
    while not done.is_set(): results.append((round(time.time() - t0, 2),) + ask(i)); i += 1
lt = threading.Thread(target=loop); lt.start()
time.sleep(3)
free = int(subprocess.check_output(["nvidia-smi", "--query-gpu=memory.free", "--format=csv,noheader,nounits"]).split()[0]) / 1024
gib = free + hold_extra
th0 = time.time() - t0
print(f"[{th0:.2f}] another process takes {gib:.2f} GiB ({free:.2f} free + {hold_extra})", flush=True)
hp = subprocess.Popen(["stdbuf", "-oL", "freetoken", "device", "--hold", f"{gib:.3f}", "--seconds", "15", "--patience", "10"],
                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
hold_log = []
for line in hp.stdout: hold_log.append((round(time.time() - t0, 3), line.rstrip()))
hp.wait(); th1 = time.time() - t0
print(f"[{th1:.2f}] holder exited rc {hp.returncode}", flush=True)
time.sleep(8); done.set(); lt.join()
json.dump(get("/v1/stats"), open(f"{out}/stats_after.json", "w"), indent=1)
stop.set(); th.join()
json.dump({"samples": samples, "hold_log": hold_log, "results": results}, open(f"{out}/elastic.json", "w"), indent=1)
for t, l in hold_log[:2] + hold_log[-4:]: print(f"  hold [{t:.3f}] {l}")
before = [s for s in samples if s[0] < th0]; during = [s for s in samples if th0 <= s[0] <= th1]; after = [s for s in samples if s[0] > th1 + 2]
fmt = lambda s: f"{s[1]} slots {s[2]/2**30:.2f} GiB"
if before: print("before:", fmt(before[-1]))
if during:
    lo = min(during, key=lambda s: s[2]); print("lowest while held:", fmt(lo), f"at +{lo[0]-th0:.2f}s")
    first = next((s for s in during if s[2] < before[-1][2]), None)
    if first: print(f"first shrink seen at +{first[0]-th0:.2f}s after the other process started")
if after: print("after:", fmt(after[-1]))
held = [(t, float(m.group(1))) for t, l in hold_log if (m := re.search(r"holding ([0-9.]+) GiB", l))]
got = next((t for t, g in held if g >= gib - 0.26), None)
print(f"the other process had {held[-1][1] if held else 0:.2f} of {gib:.2f} GiB" +
      (f", all of it at +{got - th0:.2f}s after it started" if got else ""))
fails = [r for r in results if r[1] != 200]; diff = [r for r in results if r[1] == 200 and r[2] != ref]
print(f"requests during the run: {len(results)}, failed {len(fails)}, text differs {len(diff)}"
      f" (before the other process: {sum(r[0] < th0 for r in diff)}, while it held: {sum(th0 <= r[0] <= th1 for r in diff)},"
      f" after: {sum(r[0] > th1 for r in diff)}), failed while it held: {sum(th0 <= r[0] <= th1 for r in fails)}")
for r in fails[:3] + diff[:2]: print("  ", r[0], r[1], r[2][-80:])
