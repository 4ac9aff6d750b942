"""The quota ledger: nominal, borrowing limit, cohort lending and lending limits."""

from optsched.kueue.quota import UNLIMITED, QuotaLedger
from optsched.model.snapshot import ClusterQueue, FlavorQuota, ResourceGroup, ResourceQuota
from tests.builders import gpu_queue, node, snapshot

GPU = "nvidia.com/gpu"


def ledger(*queues: ClusterQueue) -> QuotaLedger:
    return QuotaLedger.from_snapshot(snapshot([node("n1")], [], cluster_queues=list(queues)))


def used(queue: ClusterQueue, gpus: int) -> ClusterQueue:
    return queue.model_copy(update={"usage": {"default": {GPU: gpus}}})


def test_without_cohort_only_nominal_minus_usage() -> None:
    book = ledger(used(gpu_queue("a", gpus=8), 3))
    assert book.available("a", "default", GPU) == 5
    book.charge("a", "default", {GPU: 5})
    assert book.available("a", "default", GPU) == 0
    assert book.available("a", "other-flavor", GPU) == UNLIMITED
    assert book.available("a", "default", "example.com/unquoted") == UNLIMITED


def test_cohort_borrowing_is_capped_by_limit_and_by_what_others_leave_unused() -> None:
    book = ledger(gpu_queue("a", gpus=8, cohort="c"), used(gpu_queue("b", gpus=8, cohort="c"), 2))
    assert book.available("a", "default", GPU) == 8 + 6
    capped = ledger(gpu_queue("a", gpus=8, cohort="c", borrowing_limit=2), gpu_queue("b", gpus=8, cohort="c"))
    assert capped.available("a", "default", GPU) == 10


def test_lending_limit_keeps_part_of_the_lender_quota() -> None:
    lender = ClusterQueue(
        name="b",
        cohort="c",
        resource_groups=(
            ResourceGroup(
                covered_resources=(GPU,),
                flavors=(
                    FlavorQuota(
                        name="default", resources=(ResourceQuota(name=GPU, nominal=8, lending_limit=3),)
                    ),
                ),
            ),
        ),
    )
    book = ledger(gpu_queue("a", gpus=4, cohort="c"), lender)
    assert book.available("a", "default", GPU) == 4 + 3
    # The lender can still use its whole nominal quota once a has borrowed: but then a's borrowing
    # would leave the cohort short, so only its unlent part stays free.
    book.charge("a", "default", {GPU: 7})
    assert book.available("b", "default", GPU) == 5


def test_shortfall_describes_the_first_blocking_resource() -> None:
    book = ledger(used(gpu_queue("a", gpus=8), 6))
    assert book.shortfall("a", "default", {GPU: 2, "cpu": 1000}) is None
    short = book.shortfall("a", "default", {GPU: 4})
    assert short is not None
    assert short.describe() == (
        "ClusterQueue a GPU quota (flavor default): needs 4, 2 left (nominal 8, no cohort to borrow from)"
    )
    assert book.max_pods("a", "default", {GPU: 1, "cpu": 1000}) == 2
