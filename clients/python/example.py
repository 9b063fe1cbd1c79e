"""A worker for the demo's order workflow (test/demo/order.json).

    PGDATABASE=shop python3 example.py        # stop with Ctrl-C or SIGTERM
"""
import logging

from wfengine_worker import TaskFailure, Worker

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")


def charge_card(task):
    if task.input.get("amount", 0) <= 0:
        raise TaskFailure("bad_amount", "nothing to charge", retryable=False)
    return {"charge_id": "ch_" + task.idempotency_key, "status": "captured"}


def reserve_stock(task):
    return {"reservation_id": "rsv_" + task.idempotency_key, "sku": task.input["sku"]}


def send_receipt(task):
    return {"message_id": f"msg_{task.task_id}@demo.invalid", "to": task.input["customer"]}


Worker("", ["payments", "warehouse", "email"],
       {"charge_card": charge_card, "reserve_stock": reserve_stock,
        "send_receipt": send_receipt},
       concurrency=4, lease=30, wait=10).run()
