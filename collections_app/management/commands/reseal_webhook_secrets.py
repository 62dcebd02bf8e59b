from collections_app.services.origins import reseal_credentials
from collections_app.services.webhooks import reseal_secrets
from ragsite.commands import ServiceCommand


class Command(ServiceCommand):
    help = (
        "Encrypt every webhook signing secret, and every collection source's credentials, again with the "
        "first of WEBHOOK_SECRET_KEYS: run it after putting a new key first, then drop the old one "
        "(docs/webhooks.md, docs/sources.md)."
    )

    def handle(self, *args, **options):
        resealed, unreadable = reseal_secrets()
        self.stdout.write(f"{resealed} webhook secrets sealed with the first key")
        if unreadable:
            self.stderr.write(
                f"{unreadable} webhook secrets no configured key opens: give those hooks new secrets in the "
                "admin (Give the selected webhooks new signing secrets)"
            )
        sources, lost = reseal_credentials()
        self.stdout.write(f"{sources} source credentials sealed with the first key")
        if lost:
            self.stderr.write(
                f"{lost} sources' credentials no configured key opens: set them again (PUT "
                "/api/v1/collections/{name}/source, or the MCP tool set_source)"
            )
