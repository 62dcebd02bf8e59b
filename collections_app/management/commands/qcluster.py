"""`manage.py qcluster`: django-q2's cluster, which also stops when its whole process group is signalled.

SIGTERM to the group (systemd's and docker's way, `kill -- -PGID`) reaches the sentinel and its
workers as well as the main process. The sentinel dies at once (its SIGTERM is the default), often
asleep in a wait on the cluster's stop event; the main process's own stop then sets that event, whose
`notify_all` waits for the dead sleeper to wake, forever. Here the main process stops the cluster
from a thread and watches the sentinel meanwhile: once the sentinel is gone by a signal, there is
nothing left to stop cleanly, and the process exits.
"""

import logging
import os
import signal
import threading

from django_q.cluster import Cluster
from django_q.management.commands.qcluster import Command as ClusterCommand

logger = logging.getLogger("ragsite.tasks")

# How often a stop in progress checks whether the sentinel is still there to finish it.
POLL_SECONDS = 0.1


class Command(ClusterCommand):
    def handle(self, *args, **options):
        if options.get("run_once") or options.get("cluster_name"):  # django-q2's own, as it was
            return super().handle(*args, **options)
        cluster = Cluster()  # installs django-q2's handlers, replaced here
        signal.signal(signal.SIGTERM, lambda signum, frame: stop(cluster))
        signal.signal(signal.SIGINT, lambda signum, frame: stop(cluster))
        cluster.start()


def stop(cluster: Cluster) -> None:
    """The cluster's own stop, unless its sentinel died of the same signal: then exit."""
    if cluster.stop_event is None:  # stopped already
        return
    stopping = threading.Thread(target=cluster.stop, daemon=True, name="qcluster-stop")
    stopping.start()
    while stopping.is_alive():
        stopping.join(POLL_SECONDS)
        sentinel = cluster.sentinel
        if stopping.is_alive() and sentinel is not None and gone(sentinel):
            # Gone by the signal or by an error the signal caused in it (with the Redis broker its
            # connection breaks first, and it exits 1): either way nobody is left to finish the stop.
            logger.info("task cluster stopped: its sentinel ended with the group")
            logging.shutdown()
            os._exit(0)


def gone(process) -> bool:
    """Whether a child process has ended, even when its exit status was taken by a wait this signal
    interrupted. The main process waits for the sentinel at exit (multiprocessing joins its children);
    when the signal lands just after that wait reaped the sentinel and before it recorded the status,
    `is_alive()` here finds no child to wait for and answers True for ever."""
    if not process.is_alive():  # reaps it if it is a zombie
        return True
    try:
        os.kill(process.pid, 0)
    except ProcessLookupError:
        return True
    return False
