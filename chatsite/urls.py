from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("streaming.urls")),
    path("", include("frontend.urls")),
]

handler404 = "streaming.errors.handler404"
handler500 = "streaming.errors.handler500"
