# Prints manifest.json's predicted keys, its step time beside
# schedule.json's (agree: within 1 %), and each program's compute events.
import json
import sys

d = sys.argv[1]
pred = json.load(open(d + "/manifest.json"))["predicted"]
sched = json.load(open(d + "/schedule.json"))
print("predicted keys:", " ".join(sorted(pred)))
cost, step = pred["step_time_s"], sched["step_time_s"]
verdict = "agree" if abs(step - cost) <= 0.01 * cost else "DIFFER"
print("manifest %.2f us, schedule.json %.2f us: %s" % (cost * 1e6, step * 1e6, verdict))
for p in sched["programs"]:
    print("pp%d" % p["pp"], " ".join(
        "%s%s %.2f-%.2f" % (e["kind"][0], e.get("micro_batch", ""),
                            e["start_s"] * 1e6, e["end_s"] * 1e6)
        for e in p["events"] if e["kind"] in ("forward", "backward", "optimizer")))
