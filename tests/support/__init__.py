"""What the tests share: live servers and clients, nginx, stub and culprit apps, helpers."""
