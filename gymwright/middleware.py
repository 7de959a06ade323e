from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import JsonResponse

# Paths an anonymous visitor may reach: the login page, static files (and the icon), and the API
# (which answers 401/403 through DRF in its own error envelope instead of redirecting).
PUBLIC_PREFIXES = ("/accounts/login/", "/static/", "/api/", "/admin/login/", "/healthz", "/favicon.ico")
# The API's docs are a page for people: a browser that is not signed in is sent to sign in, as on any page (it was
# answered a bare 401), unless the operator made them public (GYMWRIGHT_API_DOCS_PUBLIC); a script is answered by
# the API's own authentication.
API_DOCS = "/api/docs/"


class LoginRequiredEverywhereMiddleware:
    """Anonymous users see only the login page."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not request.user.is_authenticated and (
            not request.path.startswith(PUBLIC_PREFIXES)
            or (
                request.path.startswith(API_DOCS)
                and not settings.API_DOCS_PUBLIC
                and "text/html" in request.headers.get("Accept", "")
            )
        ):
            if request.headers.get("HX-Request"):
                return JsonResponse({"error": {"code": "not_authenticated", "message": "Log in first."}}, status=401)
            return redirect_to_login(request.get_full_path(), settings.LOGIN_URL)
        return self.get_response(request)


class ContentSecurityPolicyMiddleware:
    """Sends settings.CONTENT_SECURITY_POLICY on every response that does not set its own."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        policy = settings.CONTENT_SECURITY_POLICY
        if policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = policy
        return response


class DomainErrorMiddleware:
    """A safety net for HTML views: a DomainError that a view did not handle becomes a
    clear 4xx page (or JSON for API/htmx callers), never a 500."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        from django.shortcuts import render

        from gymwright.errors import DomainError

        if not isinstance(exception, DomainError):
            return None
        body = {"error": {"code": exception.code, "message": exception.message, "details": exception.details}}
        if (
            request.path.startswith("/api/")
            or request.headers.get("HX-Request")
            or "application/json" in request.headers.get("Accept", "")
        ):
            return JsonResponse(body, status=exception.http_status)
        return render(request, "error.html", {"error": exception}, status=exception.http_status)
