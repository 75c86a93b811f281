"""Each rank says hello (and, with `fail`, rank 1 exits with status 3)."""

import sys

import ember.distributed as dist

dist.init_process_group()
print(f"hello {dist.get_rank()} of {dist.get_world_size()} {sys.argv[1:]}", flush=True)
if sys.argv[1:] == ["fail"] and dist.get_rank() == 1:
    dist.destroy_process_group()
    sys.exit(3)
dist.destroy_process_group()
