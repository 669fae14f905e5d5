"""pairs.py DIR... - each run's paired step ratio (the median over steps of this run's step time
over the other's) between the rounds of native PyTorch, and of each allocator against the
native run of its round: the noise floor the step-time target is read against."""
import glob
import json
import statistics
import sys


def steps(path):
    with open(path) as f:
        return json.load(f)["step_seconds"]


def paired(a, b):
    return statistics.median(y / x for x, y in zip(a, b) if x > 0) - 1


for d in sys.argv[1:]:
    native = sorted(glob.glob(d + "/llmgen-native-[0-9].json"))
    print(d)
    for i in range(len(native)):
        for j in range(i + 1, len(native)):
            print("  native %d against native %d: %+.1f%%" %
                  (j + 1, i + 1, 100 * paired(steps(native[i]), steps(native[j]))))
    for alloc in ("expandable", "stitch"):
        for k, f in enumerate(sorted(glob.glob(d + "/llmgen-%s-[0-9].json" % alloc))):
            print("  %s %d against native %d: %+.1f%%" %
                  (alloc, k + 1, k + 1, 100 * paired(steps(native[k]), steps(f))))
