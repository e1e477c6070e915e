"""Checks for gpt3-175b-stage.test: plausibility and the memory closed form."""
import json
import sys

mode, path = sys.argv[1], sys.argv[2]
d = json.load(open(path))
if mode == "plausible":
    ok = 0 < d["mfu"] < 1 and all(
        0 < s["memory_bytes"] and "compute_s" in s for s in d["stages"])
    print("%d stages, 0 < mfu < 1, memory per stage against HBM: %s"
          % (len(d["stages"]), "ok" if ok and d["hbm_bytes"] > 0 else "BAD"))
    sys.exit(0)

h, a, s, b, t = 12288, 96, 2048, 1, 8
st = d["stages"][1]
layers = len(st["layers"])
in_flight = 16 - 1
act = (s * b * h * (8 + 24 / t) + 2 * a * s * s * b / t) * layers * in_flight
params = layers * ((12 * h * h + 7 * h) / t + 6 * h)
closed = 18 * params + act  # bf16 weights, fp32 grads, Adam
m = st["memory"]
loom = m["weights"] + m["gradients"] + m["optimizer_states"] + m["activations"]
diff = 100 * (loom / closed - 1)
print("stage 1: %d layers, Loom/closed-form - 1 = %.2f%%" % (layers, diff))
sys.exit(0 if abs(diff) <= 2 else 1)
