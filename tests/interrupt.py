"""interrupt.py GPUSIM ARGS... - a Ctrl-C as a terminal sends it, to a gpusim that runs a program.

gpusim ARGS runs in a session of its own; a second after it starts, SIGINT goes to its whole
process group (gpusim and the program it runs, as a terminal's Ctrl-C does). Exit 0 when gpusim
then ends by that signal within 20 s (it removed what it made, then let the signal act), 1
otherwise. The tests check what it left behind (test_predict.sh, test_verify.sh).
"""
import os
import signal
import subprocess
import sys
import time

p = subprocess.Popen(sys.argv[1:], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(1)
os.killpg(p.pid, signal.SIGINT)
try:
    rc = p.wait(timeout=20)
except subprocess.TimeoutExpired:
    os.killpg(p.pid, signal.SIGKILL)
    sys.exit("interrupt.py: gpusim still ran 20 s after a SIGINT")
if rc != -signal.SIGINT:
    sys.exit(f"interrupt.py: gpusim ended with {rc}, not by SIGINT ({-signal.SIGINT})")
