import math
import socket
import time

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render

HOSTNAME = socket.gethostname()


def hostname(request):
    """A context processor: every page names the pod (or host) that made it."""
    return {"hostname": HOSTNAME}


def home(request):
    return render(request, "blog/home.html")


@login_required
def welcome(request):
    return render(request, "blog/welcome.html")


def slow(request):
    """Answers after `?seconds=N` (at most 10), for the tests of graceful stops: a request
    in flight when uWSGI gets SIGTERM must still be answered."""
    try:
        seconds = float(request.GET.get("seconds", "1"))
    except ValueError:
        seconds = 1.0
    seconds = min(max(seconds, 0.0), 10.0) if math.isfinite(seconds) else 1.0
    time.sleep(seconds)
    return HttpResponse(f"slept {seconds:g} s on {HOSTNAME}\n", content_type="text/plain")
