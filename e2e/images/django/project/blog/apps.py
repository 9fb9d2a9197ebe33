from django.apps import AppConfig


class BlogConfig(AppConfig):
    name = "blog"

    def ready(self):
        # A login saves the user's last_login (django.contrib.auth connects
        # update_last_login to user_logged_in), the only database write this site would
        # make. The database is baked into the image and opened read-only, so that every
        # replica is the same and nothing has to be copied to a writable place at start:
        # undo that connection instead. (The other write, a rehash of a password hash
        # Django finds weak, cannot happen: build.sh's seed_db.py checks the demo's.)
        from django.contrib.auth.models import update_last_login
        from django.contrib.auth.signals import user_logged_in

        user_logged_in.disconnect(update_last_login, dispatch_uid="update_last_login")
