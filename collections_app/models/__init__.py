"""The store: agents and their keys, collections, documents, paragraphs, builds, readers and the ledger.

Table names follow the seeds where they name them (`store_meta`, `agents_chunks`, `collection_built`). Every
paragraph row carries `agent_id`: one installation serves many agents, and a row always says whose it is. A
foreign key whose column leads a unique constraint or index has no index of its own (db_index=False).

The models live in a module per concept; this package re-exports every one, so
`collections_app.models.X` (imports, migrations) keeps working.
"""

from .agents import (  # noqa: F401
    KEY_PREFIX,
    SCHEMA_VERSION,
    Agent,
    ApiKey,
    ApiKeyQuerySet,
    IdpGroup,
    Label,
    ProvisionedUser,
    Reader,
    StoreMeta,
)
from .audit import ReadAudit  # noqa: F401
from .collections import (  # noqa: F401
    PATH_LIKE,
    Collection,
    CollectionBuilt,
    Document,
    Paragraph,
    ParagraphManager,
    built_from_problem,
    upload_to,
)
from .index_files import IndexChunk, IndexFile  # noqa: F401
from .known_answers import KnownAnswer, KnownAnswersReport, KnownAnswersReportQuerySet  # noqa: F401
from .ledger import ModelCall  # noqa: F401
from .runs import BuildRun, MeasureRun  # noqa: F401
from .sources import CollectionSource, SourceLabel  # noqa: F401
from .sync import CollectionSync, KeptLabels, Webhook, WebhookDelivery  # noqa: F401
