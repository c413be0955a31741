"""A Celery app whose beat fires `tasks.report` every 2 s on every host; `once_per` lets one
firing per 6-second slot run it. Configured from the environment by run.py:

  DLS_ENDPOINTS   the cluster (comma-separated host:port)
  HOST            this host's name (for the log)
  BROKER_DIR      the filesystem broker's folder (Celery's `filesystem://` transport: no Redis
                  or RabbitMQ needed for the sample; a real deployment points at its broker)
  RUNS_FILE       where the job appends one line per run
"""

import os
from datetime import timedelta

from celery import Celery

from caerus.scheduling import current_claim, once_per

HOST = os.environ.get("HOST", "host")
RUNS_FILE = os.environ.get("RUNS_FILE", "runs.log")
SLOT = timedelta(seconds=6)

app = Celery("sample", broker="filesystem://")
broker_dir = os.environ.get("BROKER_DIR", "broker")
os.makedirs(broker_dir, exist_ok=True)
app.conf.broker_transport_options = {
    "data_folder_in": broker_dir,
    "data_folder_out": broker_dir,
    "control_folder": os.path.join(broker_dir, "control"),
}
app.conf.beat_schedule = {"report": {"task": "tasks.report", "schedule": 2.0}}
app.conf.worker_hijack_root_logger = False


@app.task(name="tasks.report", ignore_result=True)
@once_per(os.environ.get("DLS_ENDPOINTS", "127.0.0.1:7070").split(","), "samples", "celery-report", SLOT, name=HOST)
def report():
    # The job: whatever must not happen twice in a slot (an email, a payment run, a report).
    with open(RUNS_FILE, "a") as f:
        f.write(f"{current_claim().slot} {HOST}\n")
    print(f"[{HOST}] RAN the report for slot {current_claim().slot}", flush=True)
    return "sent"
