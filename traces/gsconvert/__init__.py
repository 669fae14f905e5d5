"""gsconvert: the converter of recorded GPU allocation logs into gpusim traces, a module per
job. traces/convert.py runs it (gpusim-convert once installed), and its docstring is the
converter's documentation; gsconvert.cli.main is the program.

  model      the constants and errors, the Event a reader makes (EventColumns: a snapshot's, in
             arrays), the Recording it returns, the checks of what a trace can hold, the Trace
             that build_trace makes (its rows: TraceRows)
  limits     what the walker lets Python hash (KeyCheck: dict keys, set members) and the memory
             a conversion may hold (MemoryBudget, --max-memory)
  walker     the streaming pickle walker (SnapshotWalker), which reads a snapshot in bounded
             memory, and top_user_frame
  snapshot   the PyTorch snapshot reader (read_snapshot), its checks and its intake
             (DeviceEvents, the final segments)
  fastread   the same snapshot read by gpusim's C reader (gpusim read-snapshot), about seven
             times as fast, where it is there and takes the snapshot
  inputs     the input file (gzip, the format detected from the content, the progress line),
             the RMM log reader, READERS
  inference  private pools and torch.cuda.empty_cache() calls inferred; devices merged by time
  build      the trace built from the events (build_trace: addresses to ids), the death of a
             run (trim_after_death, growth_needed, limit_at_death)
  reference  the sibling JSON (NAME.json beside a snapshot) and the reference answer
  output     the trace rendered (render_trace), the files written whole
  cli        the command line (parse_args, its --help), convert and main

Each module imports what it uses from the ones above it in this list. Standard library only
(Python 3.10+).
"""
