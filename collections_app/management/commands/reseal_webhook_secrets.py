from collections_app.services.webhooks import reseal_secrets
from ragsite.commands import ServiceCommand


class Command(ServiceCommand):
    help = (
        "Encrypt every webhook signing secret again with the first of WEBHOOK_SECRET_KEYS: run it after "
        "putting a new key first, then drop the old one (docs/webhooks.md)."
    )

    def handle(self, *args, **options):
        resealed, unreadable = reseal_secrets()
        self.stdout.write(f"{resealed} webhook secrets sealed with the first key")
        if unreadable:
            self.stderr.write(
                f"{unreadable} webhook secrets no configured key opens: give those hooks new secrets in the "
                "admin (Give the selected webhooks new signing secrets)"
            )
