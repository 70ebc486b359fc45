"""One warm process per run: the workflow's jobs hand their command to a worker that imported
torch and triton once, instead of paying the interpreter's start-up per job.

- ``session``: what the Snakefile turns on (the run's folder and variables) and off (its end);
- ``client``: the job's own command, without torch: claims a lane, starts its worker when
  there is none, hands over the command and its output files, and reports what happened —
  a failed record with the reason when the worker died during a point;
- ``keeper``: the worker's parent: records how it ended, and ends it with the run;
- ``worker``: imports once, then runs one command at a time, each in a process state set
  back to the one it started with (``isolation``).

Everything but ``worker`` and ``isolation`` is standard library only.
"""
