mod shares;
