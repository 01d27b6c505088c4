"""Rank 1 fails ('raise': bad input; 'sleep': never joins the collective) while rank 0 all-reduces: the job must
end with the error printed (the abort hook, the collective's 2 s timeout), not hang."""
import datetime
import sys
import time

import tracejit as torch
import tracejit.distributed as dist

dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=2))
if dist.get_rank() == 1:
    if sys.argv[1] == "raise":
        torch.ones(2) + torch.ones(3)
    time.sleep(100)
t = torch.ones(2)
dist.all_reduce(t)
print("rank 0 finished", flush=True)
