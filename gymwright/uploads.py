from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler


class CappedUploadHandler(FileUploadHandler):
    """Drops any uploaded file once it passes GYMWRIGHT_UPLOAD_MAX_MB.

    The rest of the request is still parsed, so the form's other fields (what the
    user typed) survive; the request is marked (request.upload_too_large) and the
    view answers with a clear error instead of keeping a truncated file. Raising
    StopUpload instead would lose the fields after the file and, because the CSRF
    middleware reads request.POST first, turn into a 500.
    """

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):  # noqa: N803 - Django's name
        self.request.upload_too_large = False
        return None

    def new_file(self, *args, **kwargs):
        super().new_file(*args, **kwargs)
        self.over_cap = False

    def receive_data_chunk(self, raw_data, start):
        if self.over_cap or start + len(raw_data) > settings.UPLOAD_MAX_BYTES:
            self.over_cap = True
            self.request.upload_too_large = True
            return None  # swallow the chunk: later handlers never see it
        return raw_data

    def file_complete(self, file_size):
        return None
