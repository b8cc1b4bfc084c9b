"""A local Ray head with logical GPUs for the CPU OpenRLHF runs: ``python ray_head.py CPUS GPUS TEMP``.
Prints ``{"address": ...}`` once Ray is up, then holds the cluster until its stdin closes and shuts
it down (this process started the node's processes, so they end with it)."""

import json
import sys

import ray

cpus, gpus, temp = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ray.init(address="local", num_cpus=cpus, num_gpus=gpus, include_dashboard=False, log_to_driver=False,
         object_store_memory=256 * 1024 * 1024, _temp_dir=temp)
print(json.dumps({"address": ray.get_runtime_context().gcs_address}), flush=True)
sys.stdin.read()
ray.shutdown()
