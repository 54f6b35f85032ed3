from django.contrib import admin
from django.urls import include, path

from frontend.views import adopting
from streaming.http.sign_in import answers_refusals

urlpatterns = [
    # The admin's own sign-in, its attempts refused past the limits answered 429 (its form,
    # streaming/admin.py, refuses them), adopting the browser's conversations as /login/ does:
    # before the admin's URLs, so that this one is found.
    path("admin/login/", adopting(answers_refusals(admin.site.login))),
    path("admin/", admin.site.urls),
    path("", include("streaming.urls")),
    path("", include("frontend.urls")),
]

handler404 = "streaming.http.errors.handler404"
handler500 = "streaming.http.errors.handler500"
