from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("streaming.urls")),
    path("", include("frontend.urls")),
]

handler404 = "streaming.http.errors.handler404"
handler500 = "streaming.http.errors.handler500"
