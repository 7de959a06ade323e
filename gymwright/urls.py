from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpResponse, HttpResponseRedirect
from django.templatetags.static import static
from django.urls import include, path
from django.views.decorators.http import require_safe
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from gymwright.api import ApiDocsPermission

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[ApiDocsPermission]), name="api-schema"),
    # The split view serves Swagger UI's start-up script as a file, so the CSP needs no inline script.
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(url_name="api-schema", permission_classes=[ApiDocsPermission]),
        name="api-docs",
    ),
    # GET and HEAD only, as every read (405 for anything else: a write here would be answered "ok").
    path("healthz", require_safe(lambda request: HttpResponse("ok", content_type="text/plain"))),
    # Browsers ask for /favicon.ico whatever the page says; send them to the one icon (not permanent:
    # its hashed static name changes with its content).
    path("favicon.ico", require_safe(lambda request: HttpResponseRedirect(static("favicon.svg")))),
    path("api/", include("gymwright.api_urls")),
    path("grading/", include("grading.urls")),
    path("previews/", include("sandbox.urls")),
    path("packs/", include("packs.urls")),
    path("", include("review.urls")),
    path("", include("authoring.urls")),
]

handler400 = "gymwright.error_views.bad_request"
handler403 = "gymwright.error_views.permission_denied"
handler404 = "gymwright.error_views.page_not_found"
handler500 = "gymwright.error_views.server_error"
