from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, StopUpload


class UploadTooLarge(Exception):
    pass


class CappedUploadHandler(FileUploadHandler):
    """Stops reading an upload as soon as it passes GYMWRIGHT_UPLOAD_MAX_MB.

    The request is then marked (request.upload_too_large) so that the view can
    answer with a clear error instead of keeping a truncated file.
    """

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        self.request.upload_too_large = False
        if content_length and content_length > settings.UPLOAD_MAX_BYTES + 1024 * 1024:
            self.request.upload_too_large = True
            raise StopUpload(connection_reset=False)
        return None

    def new_file(self, *args, **kwargs):
        super().new_file(*args, **kwargs)
        self.received = 0

    def receive_data_chunk(self, raw_data, start):
        self.received = start + len(raw_data)
        if self.received > settings.UPLOAD_MAX_BYTES:
            self.request.upload_too_large = True
            raise StopUpload(connection_reset=False)
        return raw_data

    def file_complete(self, file_size):
        return None
