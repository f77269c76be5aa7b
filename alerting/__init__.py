"""Alert delivery: signed webhooks for the alerts topic."""
