"""Memory services: store, change and delete records, recall them, build and check their nodes.

One module per verb family: `records` (store, update the text, change tags and validity, delete,
export, import), `reading` (read and list), `recall`, `nodes` (build and read a record's nodes),
`health` (the check and its repair); `common` holds what they share.

Every interface (the API, the commands, the tasks) calls these and nothing else. The rules they
keep (seed 002):

* Recall ranks EXCERPTS: the nodes of divided records, whole records that fit the window, and the
  opening of a record whose nodes are pending; several may come from one record, merged when they
  touch, within a character budget. Records never divided keep their relative order.
* Slow work (counting tokens, embedding) happens before a short write transaction, never in it.
* A store answers before its record is embedded: a task makes the vector (`vectors`), as one
  builds the nodes; recall scores the record by its words until then.
* Node building runs on the task queue, enqueued when the record's row is committed; a store
  answers at once with `nodes: {"status": "queued"}` when the record runs past the window.
* Nodes never modify their record; the health repair therefore covers locked records too.
* An agent reaches only its own records: another agent's record answers exactly like a missing one.
"""

from .common import (  # noqa: F401
    QUEUED,
    SETTLED,
    get_record,
    record_model,
    validate_max_chars,
    validate_query,
    validate_text,
)
from .health import (  # noqa: F401
    check_health,
    repair_all,
)
from .nodes import (  # noqa: F401
    NODES_CURRENT,
    NODES_MISSING,
    NODES_NOT_NEEDED,
    NODES_STALE,
    NODES_UNKNOWN,
    NodeBuild,
    NodeState,
    build_nodes,
    build_nodes_for_agent,
    get_node,
    node_state,
    record_nodes,
    repair_records,
)
from .reading import (  # noqa: F401
    list_records,
    read_record,
)
from .recall import (  # noqa: F401
    opening,
    recall,
)
from .records import (  # noqa: F401
    UNCHANGED,
    archive_episode,
    change_record,
    changed_answer,
    delete_record,
    export_records,
    import_records,
    store_memory,
    update_text,
)
from .vectors import (  # noqa: F401
    embed_vector,
    embed_vector_for_agent,
)
