from django.urls import path

app_name = "authoring"
urlpatterns = []
