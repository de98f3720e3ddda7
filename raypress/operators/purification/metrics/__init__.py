"""Image-quality numbers for purification reports (PSNR)."""
