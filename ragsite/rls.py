"""Row-level security on PostgreSQL: defence in depth under the agent filters every query applies.

Each agent-scoped table gets a policy for the role `ragsite_agent`: a row is visible (and may be
written) only when it belongs to the agent named by the setting `ragsite.agent_id`. A request
acting for an agent runs inside `agent_scope(agent_id)`: one transaction that takes the
role and names the agent with `SET LOCAL`, so a query that forgot its `agent=` filter returns
that agent's rows, or nothing, never another agent's. A django-q task acting for one agent runs in
`task_scope(agent_id)` instead: a build is many transactions, so the task's connection takes the
role for the whole task and gives it back when the task ends. Outside a scope the connection keeps
its own role, the tables' owner, which row-level security does not restrict: migrations, the
admin, management commands and the schedules that span agents see everything, as they must.

Installed by the migrations (`collections_app` 0010, `memory_app` 0005) when the database user
may create roles; otherwise nothing is installed and `agent_scope` does nothing (see
docs/security.md). SQLite has no row-level security: there the agent filters are the only guard.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

ROLE = "ragsite_agent"
SETTING = "ragsite.agent_id"
CURRENT_AGENT = f"current_setting('{SETTING}', true)"
# The Agent row's primary key for tables that point at agents by foreign key.
CURRENT_AGENT_PK = f"(SELECT id FROM collections_app_agent WHERE agent_id = {CURRENT_AGENT})"
POLICY = "ragsite_agent_rows"
# The read audit's table (collections_app.models.ReadAudit): insert-only for the agents' role.
AUDIT_TABLE = "audit_reads"


def create_role_sql() -> str:
    """Create the role (cluster-wide, so only if missing) and let the migrating user switch to it."""
    return f"""
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN
        CREATE ROLE {ROLE} NOLOGIN;
    END IF;
    EXECUTE format('GRANT {ROLE} TO %I', current_user);
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'ragsite: this database user may not create roles; row-level security is not installed';
END $$;
"""


def grants_sql() -> str:
    return f"""
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN
        GRANT USAGE ON SCHEMA public TO {ROLE};
        GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {ROLE};
        GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {ROLE};
        ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {ROLE};
        ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO {ROLE};
        -- The read audit is written by agents' requests and read by staff only: the role may add an
        -- entry (and read back the id its INSERT returns), never read, change or delete one.
        IF to_regclass('public.{AUDIT_TABLE}') IS NOT NULL THEN
            REVOKE SELECT, UPDATE, DELETE ON {AUDIT_TABLE} FROM {ROLE};
            GRANT SELECT (id) ON {AUDIT_TABLE} TO {ROLE};
        END IF;
    END IF;
END $$;
"""


def policy_sql(table: str, predicate: str, check: str | None = None) -> str:
    """Enable row-level security on `table`: `ragsite_agent` sees rows where `predicate` holds and writes
    rows where `check` (by default the same) holds."""
    return f"""
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN
        ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
        DROP POLICY IF EXISTS {POLICY} ON {table};
        CREATE POLICY {POLICY} ON {table} TO {ROLE} USING ({predicate}) WITH CHECK ({check or predicate});
    END IF;
END $$;
"""


def drop_policy_sql(table: str) -> str:
    return f"DROP POLICY IF EXISTS {POLICY} ON {table}; ALTER TABLE {table} DISABLE ROW LEVEL SECURITY;"


def installed(connection) -> bool:
    """Whether this database has the role and this connection may take it (asked once per connection)."""
    if connection.vendor != "postgresql":
        return False
    cached = getattr(connection, "_ragsite_rls", None)
    if cached is None:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_has_role(current_user, %s, 'MEMBER') FROM pg_roles WHERE rolname = %s",
                [ROLE, ROLE],
            )
            row = cursor.fetchone()
        cached = bool(row and row[0])
        connection._ragsite_rls = cached
    return cached


@contextmanager
def agent_scope(agent_id: str, using: str = "default"):
    """Run the block as `ragsite_agent` for `agent_id`, in one transaction; a no-op where RLS is not
    installed."""
    from django.db import connections, transaction

    connection = connections[using]
    if not installed(connection):
        yield
        return
    with transaction.atomic(using=using):
        with connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL ROLE {ROLE}")
            cursor.execute("SELECT set_config(%s, %s, true)", [SETTING, agent_id])
        try:
            yield
        finally:
            # SET LOCAL lasts to the end of the outermost transaction; a scope nested in a longer
            # one (a test's) gives the role back here. In a failed transaction this cannot run,
            # and the rollback ends the setting anyway.
            if not connection.needs_rollback:
                with connection.cursor() as cursor:
                    cursor.execute("RESET ROLE")
                    cursor.execute("SELECT set_config(%s, '', true)", [SETTING])


# --- Tasks ------------------------------------------------------------------
#
# A django-q task is not one transaction: a build writes its progress, beats from a thread and
# commits in a transaction of its own that locks rows. So a task takes the role for its whole
# connection (session-level `SET ROLE`, `set_config(..., false)`) and gives it back when it ends,
# however it ends. The agent is remembered per thread, so a connection opened again in the middle
# of the task (a dropped one) is scoped too, and a thread the task starts can take the same scope.

_task = threading.local()


def current_task_agent() -> str | None:
    """The agent the running task in this thread acts for, or None outside `task_scope`."""
    return getattr(_task, "agent_id", None)


def _name_agent(connection, agent_id: str | None) -> None:
    with connection.cursor() as cursor:
        if agent_id is None:
            cursor.execute("RESET ROLE")
            cursor.execute("SELECT set_config(%s, '', false)", [SETTING])
        else:
            cursor.execute(f"SET ROLE {ROLE}")
            cursor.execute("SELECT set_config(%s, %s, false)", [SETTING, agent_id])


@contextmanager
def task_scope(agent_id: str, using: str = "default"):
    """Run a task acting for `agent_id` as `ragsite_agent`, for as many transactions as it takes.

    An empty `agent_id` (the task's row was not found) is a scope that sees nothing. Inside a
    caller's transaction (a test's, or a task run synchronously by a request) a session setting
    would outlive that transaction's rollback, so there this is `agent_scope`. A no-op where RLS is
    not installed."""
    from django.db import connections

    connection = connections[using]
    if not installed(connection):
        yield
        return
    if connection.in_atomic_block:
        with agent_scope(agent_id, using=using):
            yield
        return
    previous = current_task_agent()
    _task.agent_id = agent_id
    try:
        _name_agent(connection, agent_id)
        yield
    finally:
        _task.agent_id = previous
        try:
            _name_agent(connection, previous)
        except Exception:
            # A connection that cannot give the role back must not serve the next task with it.
            connection.close()


def rescope_new_connection(sender, connection, **kwargs) -> None:
    """A connection opened inside a task (the first, or one replacing a dropped one) takes its scope."""
    agent_id = current_task_agent()
    if agent_id is not None and connection.vendor == "postgresql" and installed(connection):
        try:
            _name_agent(connection, agent_id)
        except Exception:
            connection.close()  # never left open as the owner inside a task
            raise
